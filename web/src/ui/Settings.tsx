import { h, type ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api } from "../api";
import { state } from "../state";
import type { Channel, Role } from "../types";
import { displayName, Perm } from "../types";

// The permissions the editors offer (Discord's bits).
const BITS: [string, bigint][] = [
  ["View Channels", Perm.ViewChannel],
  ["Send Messages", Perm.SendMessages],
  ["Read Message History", Perm.ReadHistory],
  ["Mention @everyone", Perm.MentionEveryone],
  ["Manage Messages", Perm.ManageMessages],
  ["Manage Channels", Perm.ManageChannels],
  ["Create Invite", Perm.CreateInvite],
  ["Manage Roles", Perm.ManageRoles],
  ["Administrator", Perm.Administrator],
];

function Frame(props: { title: string; onClose: () => void; error: string; children: ComponentChildren }) {
  return (
    <div class="backdrop" onMouseDown={(e) => e.target === e.currentTarget && props.onClose()}>
      <div class="card modal wide" role="dialog" aria-modal="true" aria-label={props.title}>
        <h2>{props.title}</h2>
        {props.children}
        {props.error && (
          <p class="error" role="alert">
            {props.error}
          </p>
        )}
        <div class="row">
          <button onClick={props.onClose}>Done</button>
        </div>
      </div>
    </div>
  );
}

function useRun(): [string, (fn: () => Promise<unknown>) => void] {
  const [error, setError] = useState("");
  return [
    error,
    (fn) => {
      setError("");
      fn().then(
        () => state.changed(),
        (e) => setError((e as Error).message),
      );
    },
  ];
}

function RoleRow(props: { guildId: string; role: Role; run: (fn: () => Promise<unknown>) => void }) {
  const { role, guildId } = props;
  const everyone = role.id === guildId;
  const perms = BigInt(role.permissions || "0");
  const patch = (body: object) =>
    props.run(async () => {
      const r = await api<Role>("PATCH", `/guilds/${guildId}/roles/${role.id}`, body);
      const g = state.guilds.get(guildId);
      if (g) g.roles = g.roles.map((x) => (x.id === r.id ? r : x));
    });
  return (
    <fieldset class="role">
      <legend>{role.name}</legend>
      {!everyone && (
        <label class="check">
          <input type="checkbox" checked={role.hoist} onChange={(e) => patch({ hoist: (e.target as HTMLInputElement).checked })} />
          <span>Show separately in the member list</span>
        </label>
      )}
      <div class="bits">
        {BITS.map(([name, bit]) => (
          <label class="check" key={name}>
            <input
              type="checkbox"
              checked={(perms & bit) !== 0n}
              onChange={(e) => patch({ permissions: String((e.target as HTMLInputElement).checked ? perms | bit : perms & ~bit) })}
            />
            <span>{name}</span>
          </label>
        ))}
      </div>
      {!everyone && (
        <button
          class="small danger"
          onClick={() =>
            props.run(async () => {
              await api("DELETE", `/guilds/${guildId}/roles/${role.id}`);
              const g = state.guilds.get(guildId);
              if (g) g.roles = g.roles.filter((x) => x.id !== role.id);
            })
          }
        >
          Delete role {role.name}
        </button>
      )}
    </fieldset>
  );
}

// ServerSettings edits roles (name, hoist, permissions) and who holds them.
export function ServerSettings(props: { guildId: string; onClose: () => void }) {
  const { guildId } = props;
  const [error, run] = useRun();
  const [name, setName] = useState("");
  const g = state.guilds.get(guildId);
  if (!g) return null;
  const roles = state.roles(guildId);
  const assignable = roles.filter((r) => r.id !== guildId && !r.managed);
  return (
    <Frame title="Server settings" onClose={props.onClose} error={error}>
      <h3>Roles</h3>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          run(async () => {
            const r = await api<Role>("POST", `/guilds/${guildId}/roles`, { name: name.trim() });
            g.roles = [...g.roles.filter((x) => x.id !== r.id), r];
            setName("");
          });
        }}
      >
        <label class="grow">
          <span>New role name</span>
          <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} maxLength={100} />
        </label>
        <button type="submit" class="primary" disabled={!name.trim()}>
          Create Role
        </button>
      </form>
      {roles.map((r) => (
        <RoleRow key={r.id} guildId={guildId} role={r} run={run} />
      ))}
      <h3>Members</h3>
      <table class="grid">
        <thead>
          <tr>
            <th>Member</th>
            {assignable.map((r) => (
              <th key={r.id}>{r.name}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {[...g.members].map(([id, m]) => {
            const who = displayName(state.users.get(id) || m.user, m);
            return (
              <tr key={id}>
                <td>{who}</td>
                {assignable.map((r) => (
                  <td key={r.id}>
                    <input
                      type="checkbox"
                      aria-label={`${who} has ${r.name}`}
                      checked={m.roles.includes(r.id)}
                      onChange={(e) =>
                        run(async () => {
                          const on = (e.target as HTMLInputElement).checked;
                          await api(on ? "PUT" : "DELETE", `/guilds/${guildId}/members/${id}/roles/${r.id}`);
                          m.roles = on ? [...m.roles, r.id] : m.roles.filter((x) => x !== r.id);
                        })
                      }
                    />
                  </td>
                ))}
              </tr>
            );
          })}
        </tbody>
      </table>
    </Frame>
  );
}

// ChannelPermissions edits a channel's role overwrites: each permission
// allowed, denied or left to the role.
export function ChannelPermissions(props: { channel: Channel; onClose: () => void }) {
  const { channel } = props;
  const guildId = channel.guild_id!;
  const [error, run] = useRun();
  const roles = state.roles(guildId);
  const current = state.channels.get(channel.id) || channel;
  const ow = (id: string) => current.permission_overwrites?.find((o) => o.id === id && o.type === 0);
  const set = (roleId: string, bit: bigint, mode: string) =>
    run(async () => {
      const o = ow(roleId);
      let allow = BigInt(o?.allow || "0") & ~bit;
      let deny = BigInt(o?.deny || "0") & ~bit;
      if (mode === "allow") allow |= bit;
      if (mode === "deny") deny |= bit;
      const c = state.channels.get(channel.id);
      const rest = (c?.permission_overwrites || []).filter((x) => !(x.id === roleId && x.type === 0));
      if (allow === 0n && deny === 0n) {
        await api("DELETE", `/channels/${channel.id}/permissions/${roleId}`);
        if (c) c.permission_overwrites = rest;
      } else {
        await api("PUT", `/channels/${channel.id}/permissions/${roleId}`, { type: 0, allow: String(allow), deny: String(deny) });
        if (c) c.permission_overwrites = [...rest, { id: roleId, type: 0, allow: String(allow), deny: String(deny) }];
      }
    });
  return (
    <Frame title={`Permissions of #${state.channelName(channel)}`} onClose={props.onClose} error={error}>
      <table class="grid">
        <thead>
          <tr>
            <th>Role</th>
            {BITS.slice(0, 5).map(([n]) => (
              <th key={n}>{n}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {roles.map((r) => {
            const o = ow(r.id);
            return (
              <tr key={r.id}>
                <td>{r.name}</td>
                {BITS.slice(0, 5).map(([n, bit]) => {
                  const mode = (BigInt(o?.allow || "0") & bit) !== 0n ? "allow" : (BigInt(o?.deny || "0") & bit) !== 0n ? "deny" : "inherit";
                  return (
                    <td key={n}>
                      <select aria-label={`${n} for ${r.name}`} value={mode} onChange={(e) => set(r.id, bit, (e.target as HTMLSelectElement).value)}>
                        <option value="inherit">/</option>
                        <option value="allow">Allow</option>
                        <option value="deny">Deny</option>
                      </select>
                    </td>
                  );
                })}
              </tr>
            );
          })}
        </tbody>
      </table>
    </Frame>
  );
}
