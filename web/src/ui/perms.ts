// Client-side permission estimates, only to decide which controls to
// show; the server decides every action.
import { state } from "../state";
import { Perm } from "../types";

export function basePermissions(guildId: string): bigint {
  const g = state.guilds.get(guildId);
  const me = state.me?.id;
  if (!g || !me) return 0n;
  if (g.owner_id === me) return Perm.Administrator | Perm.ManageChannels | Perm.CreateInvite | Perm.ManageMessages | Perm.ManageRoles;
  const mine = new Set(state.member(guildId, me)?.roles || []);
  let p = 0n;
  for (const r of g.roles) {
    if (r.id === guildId || mine.has(r.id)) p |= BigInt(r.permissions || "0");
  }
  return p;
}

export function can(guildId: string | undefined, bit: bigint): boolean {
  if (!guildId) return false;
  const p = basePermissions(guildId);
  return (p & Perm.Administrator) !== 0n || (p & bit) !== 0n;
}
