package bots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Interaction types.
const (
	InteractionPing               = 1
	InteractionApplicationCommand = 2
	InteractionMessageComponent   = 3
	InteractionAutocomplete       = 4
	InteractionModalSubmit        = 5
)

// FailureMessage is what the invoking user sees when the application did
// not respond inside the acknowledgement window.
const FailureMessage = "The application did not respond"

type invokeRequest struct {
	Type          int             `json:"type"`
	ApplicationID snowflake.ID    `json:"application_id"`
	GuildID       snowflake.ID    `json:"guild_id"`
	ChannelID     snowflake.ID    `json:"channel_id"`
	MessageID     snowflake.ID    `json:"message_id"`
	Data          json.RawMessage `json:"data"`
	Nonce         string          `json:"nonce"`
}

// commandData is the data of command and autocomplete interactions.
type commandData struct {
	ID      snowflake.ID      `json:"id"`
	Name    string            `json:"name"`
	Type    int               `json:"type"`
	Options []json.RawMessage `json:"options,omitempty"`
}

// componentData is the data of component and modal interactions.
type componentData struct {
	CustomID      string            `json:"custom_id"`
	ComponentType int               `json:"component_type,omitempty"`
	Values        []string          `json:"values,omitempty"`
	Components    []json.RawMessage `json:"components,omitempty"`
}

// invoke is POST /interactions, as Discord's own clients send it: a user
// runs a command (or presses a component, autocompletes, submits a modal)
// in a guild channel. The interaction goes to the application's endpoint
// or its gateway sessions and the acknowledgement timer starts; the
// caller gets 204 at once and sees the answer as a message.
func (h *Handler) invoke(w http.ResponseWriter, r *http.Request, c caller) (err error) {
	if c.bot {
		return ErrBotsForbidden
	}
	ictx, span := tracing.Start(r.Context(), "interaction.invoke")
	defer func() { tracing.End(span, err) }()
	r = r.WithContext(ictx)
	var req invokeRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	if req.Type < InteractionApplicationCommand || req.Type > InteractionModalSubmit {
		return FormError("type", "BASE_TYPE_CHOICES", "Value must be one of (2, 3, 4, 5).")
	}
	if req.ChannelID == 0 {
		return FormError("channel_id", "BASE_TYPE_REQUIRED", "This field is required.")
	}
	a, err := h.deps.Store.GetApplication(ctx, req.ApplicationID)
	if err != nil {
		return storeErr(err, ErrUnknownApplication)
	}
	channel, err := h.deps.Guilds.Channel(ctx, req.ChannelID)
	if err != nil {
		return fmt.Errorf("interaction channel %d: %w", req.ChannelID, err)
	}
	guildID := channel.GuildID
	if guildID == 0 {
		return fmt.Errorf("%w: %d is not a guild channel", ErrUnknownChannel, req.ChannelID)
	}
	if req.GuildID != 0 && req.GuildID != guildID {
		return FormError("guild_id", "BASE_TYPE_INVALID", "The channel is not in this guild.")
	}
	userPerms, err := h.deps.Guilds.ChannelPermissions(ctx, c.id, req.ChannelID)
	if err != nil {
		return fmt.Errorf("interaction by %d: %w", c.id, err)
	}
	if !userPerms.Has(permissions.ViewChannel | permissions.UseApplicationCommands) {
		return fmt.Errorf("%w: USE_APPLICATION_COMMANDS in %d", ErrMissingPermissions, req.ChannelID)
	}
	if _, err := h.deps.Store.GetInstallation(ctx, guildID, a.ID); err != nil {
		return storeErr(err, ErrMissingAccess)
	}
	// The installation record may lag a kick: the guild's answer wins.
	appPerms, err := h.deps.Guilds.ChannelPermissions(ctx, a.BotUserID, req.ChannelID)
	if errors.Is(err, ErrUnknownMember) {
		return fmt.Errorf("%w: application %d is not in guild %d", ErrMissingAccess, a.ID, guildID)
	}
	if err != nil {
		return fmt.Errorf("application permissions: %w", err)
	}

	in := Interaction{
		ApplicationID: a.ID, Type: req.Type, GuildID: guildID, ChannelID: req.ChannelID,
		UserID: c.id, BotUserID: a.BotUserID, CreatedAt: h.cfg.Clock.Now(), State: StatePending,
	}
	var message *wire.Message
	switch req.Type {
	case InteractionApplicationCommand, InteractionAutocomplete:
		data, name, err := h.commandInvocation(ctx, a, guildID, userPerms, req.Data)
		if err != nil {
			return err
		}
		if data, err = h.withResolved(ctx, c.id, guildID, req.ChannelID, data); err != nil {
			return err
		}
		in.Data, in.CommandName = data, name
	default:
		var d componentData
		if err := decodeJSON(req.Data, &d); err != nil {
			return err
		}
		if n := runes(d.CustomID); n < 1 || n > 100 {
			return FormError("data.custom_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
		}
		if req.Type == InteractionMessageComponent {
			if req.MessageID == 0 {
				return FormError("message_id", "BASE_TYPE_REQUIRED", "This field is required.")
			}
			m, err := h.deps.Messages.GetMessage(ctx, req.ChannelID, req.MessageID)
			if err != nil {
				return fmt.Errorf("component message: %w", err)
			}
			if m.Author.ID != a.BotUserID {
				return fmt.Errorf("%w: message %d is not the application's", ErrUnknownMessage, req.MessageID)
			}
			if err := checkComponentUse(m, d); err != nil {
				return err
			}
			message, in.MessageID = &m, m.ID
		}
		in.Data, _ = json.Marshal(d)
	}

	if in.ID, err = h.deps.IDs.Next(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	token, mac, err := h.keys.newInteractionToken(in.ID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	in.TokenMAC = mac
	member, err := h.deps.Guilds.Member(ctx, guildID, c.id)
	if err != nil {
		return fmt.Errorf("invoking member: %w", err)
	}
	mp := wire.Bits(userPerms)
	member.Permissions = &mp
	payload, err := json.Marshal(interactionPayload{
		ID: in.ID, ApplicationID: a.ID, Type: in.Type, Data: in.Data, GuildID: guildID, ChannelID: req.ChannelID,
		Channel: channel, Member: member, Token: token,
		Version: 1, AppPermissions: wire.Bits(appPerms), Locale: "en-US", GuildLocale: "en-US",
		Entitlements: []any{}, AuthorizingIntegrationOwners: map[string]snowflake.ID{"0": guildID},
		Context: 0, AttachmentSizeLimit: 25 << 20, Message: message,
		Guild: &interactionGuild{ID: guildID, Locale: "en-US", Features: []string{}},
	})
	if err != nil {
		return fmt.Errorf("encode interaction: %w", err)
	}
	if err := h.deps.Store.CreateInteraction(ctx, in); err != nil {
		return fmt.Errorf("%w: store interaction: %w", ErrUnavailable, err)
	}
	h.armTimer(in)
	h.rememberTrace(ctx, in.ID)
	if a.InteractionsEndpointURL != "" {
		h.goAsync(func() {
			dctx, cancel := background(ctx, h.cfg.AckWindow+time.Second)
			defer cancel()
			h.deliverHTTP(dctx, a, in, payload)
		})
	} else if n := h.deps.Dispatcher.DeliverToUser(ctx, a.BotUserID, guildID, "INTERACTION_CREATE", payload); n == 0 {
		h.metrics.deliveries.WithLabelValues("gateway", "no_session").Inc()
	} else {
		h.metrics.deliveries.WithLabelValues("gateway", "ok").Inc()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// interactionPayload is the interaction object delivered to the bot.
type interactionPayload struct {
	ID                           snowflake.ID            `json:"id"`
	ApplicationID                snowflake.ID            `json:"application_id"`
	Type                         int                     `json:"type"`
	Data                         json.RawMessage         `json:"data,omitempty"`
	GuildID                      snowflake.ID            `json:"guild_id"`
	ChannelID                    snowflake.ID            `json:"channel_id"`
	Channel                      wire.Channel            `json:"channel"`
	Member                       wire.Member             `json:"member"`
	Token                        string                  `json:"token"`
	Version                      int                     `json:"version"`
	AppPermissions               wire.Bits               `json:"app_permissions"`
	Locale                       string                  `json:"locale"`
	GuildLocale                  string                  `json:"guild_locale"`
	Entitlements                 []any                   `json:"entitlements"`
	AuthorizingIntegrationOwners map[string]snowflake.ID `json:"authorizing_integration_owners"`
	Context                      int                     `json:"context"`
	AttachmentSizeLimit          int                     `json:"attachment_size_limit"`
	Message                      *wire.Message           `json:"message,omitempty"`
	Guild                        *interactionGuild       `json:"guild,omitempty"`
}

// interactionGuild is the partial guild of a guild interaction.
type interactionGuild struct {
	ID       snowflake.ID `json:"id"`
	Locale   string       `json:"locale"`
	Features []string     `json:"features"`
}

// commandInvocation resolves and checks the command of a command or
// autocomplete interaction and returns the data object to deliver.
func (h *Handler) commandInvocation(ctx context.Context, a Application, guildID snowflake.ID, userPerms permissions.Bits, raw json.RawMessage) (json.RawMessage, string, error) {
	var d commandData
	if err := decodeJSON(raw, &d); err != nil {
		return nil, "", err
	}
	if d.ID == 0 {
		return nil, "", FormError("data.id", "BASE_TYPE_REQUIRED", "This field is required.")
	}
	cmd, err := h.findCommand(ctx, a.ID, guildID, d.ID)
	if err != nil {
		return nil, "", err
	}
	if (d.Name != "" && d.Name != cmd.Def.Name) || (d.Type != 0 && d.Type != cmd.Def.Type) {
		return nil, "", FormError("data.name", "APPLICATION_COMMAND_OUTDATED", "The command's definition changed; reload it.")
	}
	if dmp := cmd.Def.DefaultMemberPermissions; dmp.Set && !userPerms.Has(permissions.Bits(dmp.V)) {
		return nil, "", fmt.Errorf("%w: command %s needs %d", ErrMissingPermissions, cmd.Def.Name, dmp.V)
	}
	if err := checkInvocationOptions(cmd.Def.Options, d.Options, "data.options"); err != nil {
		return nil, "", err
	}
	out := map[string]any{"id": cmd.ID, "name": cmd.Def.Name, "type": cmd.Def.Type}
	if len(d.Options) > 0 {
		out["options"] = d.Options
	}
	if cmd.GuildID != 0 {
		out["guild_id"] = cmd.GuildID
	}
	b, err := json.Marshal(out)
	return b, cmd.Def.Name, err
}

// givenOption is an option value as a client sends it.
type givenOption struct {
	Name    string            `json:"name"`
	Type    int               `json:"type"`
	Value   json.RawMessage   `json:"value"`
	Options []json.RawMessage `json:"options"`
	Focused bool              `json:"focused"`
}

// checkInvocationOptions checks that the given options exist in the
// definition with their types, that required ones are present and that
// subcommands nest as defined.
func checkInvocationOptions(defs []CommandOption, given []json.RawMessage, path string) error {
	seen := make(map[string]bool, len(given))
	for i, raw := range given {
		p := join(path, fmt.Sprint(i))
		var g givenOption
		if err := json.Unmarshal(raw, &g); err != nil {
			return FormError(p, "BASE_TYPE_BAD_TYPE", "Option must be an object.")
		}
		var def *CommandOption
		for j := range defs {
			if defs[j].Name == g.Name {
				def = &defs[j]
			}
		}
		if def == nil || seen[g.Name] {
			return FormError(join(p, "name"), "APPLICATION_COMMAND_OPTION_UNKNOWN", "Unknown or repeated option.")
		}
		seen[g.Name] = true
		if g.Type != def.Type {
			return FormError(join(p, "type"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Option type does not match the command.")
		}
		if def.Type == OptionSubCommand || def.Type == OptionSubCommandGroup {
			if err := checkInvocationOptions(def.Options, g.Options, join(p, "options")); err != nil {
				return err
			}
		} else if len(g.Value) == 0 {
			return FormError(join(p, "value"), "BASE_TYPE_REQUIRED", "This field is required.")
		}
	}
	for _, d := range defs {
		if d.Required && !seen[d.Name] {
			return FormError(path, "APPLICATION_COMMAND_OPTION_REQUIRED", "Option "+d.Name+" is required.")
		}
	}
	return nil
}

// armTimer schedules the acknowledgement deadline of a new interaction.
func (h *Handler) armTimer(in Interaction) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	id := in.ID
	h.timers[id] = h.cfg.Clock.AfterFunc(h.cfg.AckWindow, func() { h.expire(id) })
}

// disarm stops an interaction's timer.
func (h *Handler) disarm(id snowflake.ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.timers[id]; ok {
		t.Stop()
		delete(h.timers, id)
	}
	delete(h.traces, id)
}

var errNotPending = errors.New("bots: interaction not pending")

// expire runs at the acknowledgement deadline: an interaction still
// pending times out, its application's miss counter rises and the user
// who invoked it is told, in an ephemeral message, that the application
// did not respond.
func (h *Handler) expire(id snowflake.ID) {
	h.mu.Lock()
	delete(h.timers, id)
	delete(h.traces, id)
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock := h.lockInteraction(id)
	in, err := h.deps.Store.UpdateInteraction(ctx, id, func(in *Interaction) error {
		if in.State != StatePending {
			return errNotPending
		}
		in.State = StateTimedOut
		return nil
	})
	unlock()
	if errors.Is(err, errNotPending) {
		return
	}
	if err != nil {
		h.log.Error("interaction expiry failed", "interaction_id", id, "err", err)
		return
	}
	h.metrics.misses.WithLabelValues(in.ApplicationID.String()).Inc()
	h.log.Info("interaction not acknowledged", "interaction_id", id, "application_id", in.ApplicationID, "user_id", in.UserID)
	_, err = h.deps.Messages.CreateMessage(ctx, NewMessage{
		ChannelID: in.ChannelID, GuildID: in.GuildID, AuthorID: in.BotUserID, Content: FailureMessage,
		Flags: MessageFlagEphemeral, Type: MessageTypeDefault, EphemeralTo: in.UserID, InteractionID: in.ID,
	})
	if err != nil {
		h.log.Warn("interaction failure message not sent", "interaction_id", id, "err", err)
	}
}

// PurgeInteractions drops interactions whose tokens have expired; the
// process wiring calls it periodically.
func (h *Handler) PurgeInteractions(ctx context.Context) (int, error) {
	cutoff := snowflake.FromTime(h.cfg.Clock.Now().Add(-h.cfg.TokenLifetime - time.Minute))
	n, err := h.deps.Store.DeleteInteractionsBefore(ctx, cutoff)
	if err != nil {
		return n, fmt.Errorf("purge interactions: %w", err)
	}
	return n, nil
}
