import { h, type ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { acceptInvite, createChannel, createGuild, createInvite, firstTextChannel, openDM } from "../client";
import { navigate } from "../router";
import { state } from "../state";
import { ChannelType } from "../types";

function Modal(props: { title: string; onClose: () => void; children: ComponentChildren }) {
  useEffect(() => {
    const esc = (e: KeyboardEvent) => e.key === "Escape" && props.onClose();
    window.addEventListener("keydown", esc);
    return () => window.removeEventListener("keydown", esc);
  }, []);
  return (
    <div class="backdrop" onMouseDown={(e) => e.target === e.currentTarget && props.onClose()}>
      <div class="card modal" role="dialog" aria-modal="true" aria-label={props.title}>
        <h2>{props.title}</h2>
        {props.children}
      </div>
    </div>
  );
}

function useAction() {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const run = async (fn: () => Promise<void>) => {
    setError("");
    setBusy(true);
    try {
      await fn();
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, run };
}

function Err(props: { text: string }) {
  return props.text ? (
    <p class="error" role="alert">
      {props.text}
    </p>
  ) : null;
}

// inviteCode accepts a bare code or a link ending in /invite/<code>.
export function inviteCode(s: string): string {
  const t = s.trim();
  const m = /\/invite\/([^/?#\s]+)/.exec(t);
  return m ? m[1] : t;
}

export function Dialog(props: { kind: string; guildId: string | null; channelId: string | null; onClose: () => void }) {
  const { error, busy, run } = useAction();
  const [name, setName] = useState("");
  const [type, setType] = useState(String(ChannelType.GuildText));
  const [parent, setParent] = useState("");
  const [hidden, setHidden] = useState(false);
  const [code, setCode] = useState("");

  useEffect(() => {
    if (props.kind === "invite") {
      const ch = (props.channelId && state.channels.get(props.channelId)) || (props.guildId && firstTextChannel(props.guildId));
      if (ch) run(async () => setCode(await createInvite(ch.id)));
    }
  }, [props.kind]);

  const close = props.onClose;
  switch (props.kind) {
    case "create-guild":
      return (
        <Modal title="Create a server" onClose={close}>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              run(async () => {
                const id = await createGuild(name.trim());
                close();
                navigate(`/channels/${id}`);
              });
            }}
          >
            <label>
              <span>Server name</span>
              <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} required maxLength={100} />
            </label>
            <Err text={error} />
            <div class="row">
              <button type="submit" class="primary" disabled={busy || !name.trim()}>
                Create
              </button>
              <button type="button" onClick={close}>
                Cancel
              </button>
            </div>
          </form>
        </Modal>
      );
    case "join":
      return (
        <Modal title="Join a server" onClose={close}>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              run(async () => {
                const inv = await acceptInvite(inviteCode(code));
                close();
                const gid = inv?.guild?.id || inv?.guild_id;
                navigate(gid ? `/channels/${gid}${inv?.channel?.id ? "/" + inv.channel.id : ""}` : "/channels/@me");
              });
            }}
          >
            <label>
              <span>Invite link or code</span>
              <input value={code} onInput={(e) => setCode((e.target as HTMLInputElement).value)} required />
            </label>
            <Err text={error} />
            <div class="row">
              <button type="submit" class="primary" disabled={busy || !code.trim()}>
                Join
              </button>
              <button type="button" onClick={close}>
                Cancel
              </button>
            </div>
          </form>
        </Modal>
      );
    case "create-channel": {
      const gid = props.guildId!;
      const cats = state.guildChannels(gid).filter((c) => c.type === ChannelType.GuildCategory);
      return (
        <Modal title="Create a channel" onClose={close}>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              run(async () => {
                const c = await createChannel(gid, name.trim(), Number(type), parent || null, hidden);
                close();
                if (c.type !== ChannelType.GuildCategory) navigate(`/channels/${gid}/${c.id}`);
              });
            }}
          >
            <label>
              <span>Channel name</span>
              <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} required maxLength={100} />
            </label>
            <label>
              <span>Type</span>
              <select value={type} onChange={(e) => setType((e.target as HTMLSelectElement).value)}>
                <option value={String(ChannelType.GuildText)}>Text</option>
                <option value={String(ChannelType.GuildVoice)}>Voice</option>
                <option value={String(ChannelType.GuildCategory)}>Category</option>
              </select>
            </label>
            {type !== String(ChannelType.GuildCategory) && cats.length > 0 && (
              <label>
                <span>Category</span>
                <select value={parent} onChange={(e) => setParent((e.target as HTMLSelectElement).value)}>
                  <option value="">None</option>
                  {cats.map((c) => (
                    <option value={c.id}>{c.name}</option>
                  ))}
                </select>
              </label>
            )}
            <label class="check">
              <input type="checkbox" checked={hidden} onChange={(e) => setHidden((e.target as HTMLInputElement).checked)} />
              <span>Private (hidden from @everyone)</span>
            </label>
            <Err text={error} />
            <div class="row">
              <button type="submit" class="primary" disabled={busy || !name.trim()}>
                Create
              </button>
              <button type="button" onClick={close}>
                Cancel
              </button>
            </div>
          </form>
        </Modal>
      );
    }
    case "invite": {
      const link = code ? `${location.origin}/invite/${code}` : "";
      return (
        <Modal title="Invite people" onClose={close}>
          {busy && <p role="status">Creating an invite…</p>}
          {link && (
            <label>
              <span>Invite link (valid for 24 hours)</span>
              <input readOnly value={link} onFocus={(e) => (e.target as HTMLInputElement).select()} />
            </label>
          )}
          <Err text={error} />
          <div class="row">
            {link && (
              <button
                class="primary"
                onClick={() => navigator.clipboard?.writeText(link).then(() => state.toast("Invite link copied."), () => {})}
              >
                Copy
              </button>
            )}
            <button onClick={close}>Done</button>
          </div>
        </Modal>
      );
    }
    case "new-dm": {
      const people = new Map<string, string>();
      for (const g of state.guilds.values())
        for (const id of g.members.keys()) {
          const u = state.users.get(id);
          if (u && id !== state.me?.id) people.set(id, u.username);
        }
      const chosen = name
        .split(",")
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
      return (
        <Modal title="New message" onClose={close}>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              run(async () => {
                const ids: string[] = [];
                for (const n of chosen) {
                  const hit = [...people].find(([, u]) => u.toLowerCase() === n);
                  if (!hit) throw new Error(`No one named "${n}" shares a server with you.`);
                  ids.push(hit[0]);
                }
                const c = await openDM(ids);
                close();
                navigate(`/channels/@me/${c.id}`);
              });
            }}
          >
            <label>
              <span>Usernames (comma-separated for a group)</span>
              <input value={name} list="dm-people" onInput={(e) => setName((e.target as HTMLInputElement).value)} required />
            </label>
            <datalist id="dm-people">
              {[...people.values()].map((u) => (
                <option value={u} />
              ))}
            </datalist>
            <Err text={error} />
            <div class="row">
              <button type="submit" class="primary" disabled={busy || chosen.length === 0}>
                Open
              </button>
              <button type="button" onClick={close}>
                Cancel
              </button>
            </div>
          </form>
        </Modal>
      );
    }
  }
  return null;
}
