package bots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// commandJSON is Discord's application command object.
type commandJSON struct {
	ID            snowflake.ID  `json:"id"`
	ApplicationID snowflake.ID  `json:"application_id"`
	GuildID       *snowflake.ID `json:"guild_id,omitempty"`
	Version       snowflake.ID  `json:"version"`
	CommandDef
}

func toCommandJSON(c Command) commandJSON {
	out := commandJSON{ID: c.ID, ApplicationID: c.ApplicationID, Version: c.Version, CommandDef: c.Def}
	if c.GuildID != 0 {
		g := c.GuildID
		out.GuildID = &g
	}
	if out.Options == nil && out.Type == CommandChatInput {
		out.Options = []CommandOption{}
	}
	return out
}

// maxCommandsOfType is how many commands of one type a scope may hold.
func maxCommandsOfType(typ int) int {
	if typ == CommandChatInput {
		return 100
	}
	return 15
}

// errTooManyCommands is Discord's 30032.
var errTooManyCommands = &APIError{Status: http.StatusBadRequest, Code: 30032, Message: "Maximum number of application commands reached"}

// commandScope resolves the application (owner or bot only) and the
// guild of a command route; guild commands need the application to be
// installed in the guild.
func (h *Handler) commandScope(r *http.Request, c caller) (Application, snowflake.ID, error) {
	a, err := h.ownedApplication(r, c)
	if err != nil {
		return Application{}, 0, err
	}
	if r.PathValue("guild") == "" {
		return a, 0, nil
	}
	guildID, err := pathID(r, "guild", ErrUnknownGuild)
	if err != nil {
		return Application{}, 0, err
	}
	if _, err := h.deps.Store.GetInstallation(r.Context(), guildID, a.ID); err != nil {
		return Application{}, 0, storeErr(err, ErrMissingAccess)
	}
	return a, guildID, nil
}

func (h *Handler) listCommands(w http.ResponseWriter, r *http.Request, c caller) error {
	a, guildID, err := h.commandScope(r, c)
	if err != nil {
		return err
	}
	cmds, err := h.deps.Store.ListCommands(r.Context(), a.ID, guildID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]commandJSON, 0, len(cmds))
	for _, cmd := range cmds {
		out = append(out, toCommandJSON(cmd))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) getCommand(w http.ResponseWriter, r *http.Request, c caller) error {
	a, guildID, err := h.commandScope(r, c)
	if err != nil {
		return err
	}
	cmd, err := h.loadCommand(r, a.ID, guildID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCommandJSON(cmd))
	return nil
}

func (h *Handler) loadCommand(r *http.Request, appID, guildID snowflake.ID) (Command, error) {
	id, err := pathID(r, "cmd", ErrUnknownCommand)
	if err != nil {
		return Command{}, err
	}
	cmd, err := h.deps.Store.GetCommand(r.Context(), appID, guildID, id)
	if err != nil {
		return Command{}, storeErr(err, ErrUnknownCommand)
	}
	return cmd, nil
}

// createCommand is POST …/commands: a definition whose (type, name) exists
// in the scope replaces it (200); otherwise a new command is made (201).
func (h *Handler) createCommand(w http.ResponseWriter, r *http.Request, c caller) error {
	a, guildID, err := h.commandScope(r, c)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	def, err := DecodeCommand(body)
	if err != nil {
		return err
	}
	ctx := r.Context()
	existing, err := h.deps.Store.ListCommands(ctx, a.ID, guildID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	status := http.StatusCreated
	cmd := Command{ApplicationID: a.ID, GuildID: guildID, Def: def}
	sameType := 0
	for _, e := range existing {
		if e.Def.Type == def.Type {
			sameType++
			if e.Def.Name == def.Name {
				cmd.ID, status = e.ID, http.StatusOK
			}
		}
	}
	if status == http.StatusCreated && sameType >= maxCommandsOfType(def.Type) {
		return errTooManyCommands
	}
	if err := h.putCommand(ctx, &cmd); err != nil {
		return err
	}
	writeJSON(w, status, toCommandJSON(cmd))
	return nil
}

// editCommand is PATCH …/commands/{id}: the fields present replace the
// stored ones and the result is validated as a whole.
func (h *Handler) editCommand(w http.ResponseWriter, r *http.Request, c caller) error {
	a, guildID, err := h.commandScope(r, c)
	if err != nil {
		return err
	}
	cmd, err := h.loadCommand(r, a.ID, guildID)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	def := cmd.Def
	def.Options = nil // a patch carrying options replaces them; without, keep
	var probe struct {
		Options json.RawMessage `json:"options"`
		Type    *int            `json:"type"`
	}
	if err := decodeJSON(body, &probe); err != nil {
		return err
	}
	if probe.Type != nil && *probe.Type != cmd.Def.Type && !(*probe.Type == 0 && cmd.Def.Type == CommandChatInput) {
		return FormError("type", "APPLICATION_COMMAND_TYPE_IMMUTABLE", "A command's type cannot change.")
	}
	if probe.Options == nil {
		def.Options = cmd.Def.Options
	}
	if err := decodeJSON(body, &def); err != nil {
		return err
	}
	if err := ValidateCommand(&def, ""); err != nil {
		return err
	}
	ctx := r.Context()
	existing, err := h.deps.Store.ListCommands(ctx, a.ID, guildID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for _, e := range existing {
		if e.ID != cmd.ID && e.Def.Type == def.Type && e.Def.Name == def.Name {
			return FormError("name", "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique.")
		}
	}
	cmd.Def = def
	if err := h.putCommand(ctx, &cmd); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCommandJSON(cmd))
	return nil
}

// putCommand stamps cmd with a new version and stores it; a new command
// (id 0) takes its version as its id.
func (h *Handler) putCommand(ctx context.Context, cmd *Command) error {
	var err error
	if cmd.Version, err = h.deps.IDs.Next(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if cmd.ID == 0 {
		cmd.ID = cmd.Version
	}
	if err := h.deps.Store.PutCommand(ctx, *cmd); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

func (h *Handler) deleteCommand(w http.ResponseWriter, r *http.Request, c caller) error {
	a, guildID, err := h.commandScope(r, c)
	if err != nil {
		return err
	}
	cmd, err := h.loadCommand(r, a.ID, guildID)
	if err != nil {
		return err
	}
	if err := h.deps.Store.DeleteCommand(r.Context(), a.ID, guildID, cmd.ID); err != nil {
		return storeErr(err, ErrUnknownCommand)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// overwriteCommands is PUT …/commands: the scope becomes exactly the
// given definitions; commands keeping their (type, name) keep their ids.
func (h *Handler) overwriteCommands(w http.ResponseWriter, r *http.Request, c caller) error {
	a, guildID, err := h.commandScope(r, c)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	defs, err := DecodeCommands(body)
	if err != nil {
		return err
	}
	perType := map[int]int{}
	for _, d := range defs {
		perType[d.Type]++
		if perType[d.Type] > maxCommandsOfType(d.Type) {
			return errTooManyCommands
		}
	}
	ctx := r.Context()
	existing, err := h.deps.Store.ListCommands(ctx, a.ID, guildID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	ids := make(map[string]snowflake.ID, len(existing))
	for _, e := range existing {
		ids[strconv.Itoa(e.Def.Type)+"/"+e.Def.Name] = e.ID
	}
	cmds := make([]Command, 0, len(defs))
	for _, d := range defs {
		v, err := h.deps.IDs.Next()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		id := ids[strconv.Itoa(d.Type)+"/"+d.Name]
		if id == 0 {
			id = v
		}
		cmds = append(cmds, Command{ID: id, ApplicationID: a.ID, GuildID: guildID, Version: v, Def: d})
	}
	if err := h.deps.Store.ReplaceCommands(ctx, a.ID, guildID, cmds); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]commandJSON, 0, len(cmds))
	for _, cmd := range cmds {
		out = append(out, toCommandJSON(cmd))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// findCommand resolves an invoked command: the guild's own first, then
// the global one.
func (h *Handler) findCommand(ctx context.Context, appID, guildID, id snowflake.ID) (Command, error) {
	cmd, err := h.deps.Store.GetCommand(ctx, appID, guildID, id)
	if errors.Is(err, ErrNotFound) && guildID != 0 {
		cmd, err = h.deps.Store.GetCommand(ctx, appID, 0, id)
	}
	if err != nil {
		return Command{}, storeErr(err, ErrUnknownCommand)
	}
	return cmd, nil
}
