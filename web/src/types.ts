// Discord-shaped objects as Concord sends them (only the fields the
// client reads).

export interface User {
  id: string;
  username: string;
  global_name?: string | null;
  avatar?: string | null;
  bot?: boolean;
}

export interface Role {
  id: string;
  name: string;
  color: number;
  hoist: boolean;
  position: number;
  permissions: string;
  managed?: boolean;
}

export interface Overwrite {
  id: string;
  type: number; // 0 role, 1 member
  allow: string;
  deny: string;
}

export interface Channel {
  id: string;
  type: number;
  guild_id?: string;
  name?: string | null;
  position: number;
  parent_id?: string | null;
  topic?: string | null;
  last_message_id?: string | null;
  permission_overwrites?: Overwrite[];
  recipients?: User[];
  owner_id?: string;
  rate_limit_per_user?: number;
  // Threads (types 10, 11, 12): parent_id is the channel they are in.
  thread_metadata?: ThreadMetadata;
  message_count?: number;
  member_count?: number;
  // member: the user's own membership of the thread, when they joined it.
  member?: { id?: string; user_id?: string; join_timestamp?: string } | null;
}

export interface ThreadMetadata {
  archived: boolean;
  locked?: boolean;
  auto_archive_duration?: number;
  archive_timestamp?: string;
}

export interface Member {
  user?: User;
  nick?: string | null;
  roles: string[];
  joined_at?: string;
}

export interface Guild {
  id: string;
  name: string;
  owner_id: string;
  roles: Role[];
  member_count?: number;
}

export interface Message {
  id: string;
  channel_id: string;
  guild_id?: string;
  author: User;
  member?: Member;
  content: string;
  timestamp: string;
  edited_timestamp: string | null;
  mention_everyone: boolean;
  mentions: User[];
  mention_roles: string[];
  type: number;
  nonce?: string | number;
  message_reference?: { message_id?: string; channel_id?: string; guild_id?: string };
  referenced_message?: Message | null;
  reactions?: Reaction[];
  flags?: number;
  // thread: the thread this message started (flag HAS_THREAD).
  thread?: Channel;
  // Client-side only: an optimistic copy waiting for the server, or one
  // that failed with this error.
  pending?: boolean;
  failed?: string;
}

// Reaction is one emoji's reactions on a message; me: the user is among them.
export interface Reaction {
  count: number;
  me: boolean;
  emoji: { id: string | null; name: string };
}

export const ChannelType = {
  GuildText: 0,
  DM: 1,
  GuildVoice: 2,
  GroupDM: 3,
  GuildCategory: 4,
  GuildAnnouncement: 5,
  AnnouncementThread: 10,
  PublicThread: 11,
  PrivateThread: 12,
} as const;

// MessageType values the client renders differently from a plain message.
export const MessageType = {
  Reply: 19,
  ThreadCreated: 18,
  ThreadStarter: 21,
} as const;

// isThread reports whether a channel is a thread.
export function isThread(c: Channel | undefined): boolean {
  return !!c && (c.type === ChannelType.AnnouncementThread || c.type === ChannelType.PublicThread || c.type === ChannelType.PrivateThread);
}

// hasThreads reports whether threads can be started in a channel (text
// and announcement channels).
export function hasThreads(c: Channel | undefined): boolean {
  return !!c && !!c.guild_id && (c.type === ChannelType.GuildText || c.type === ChannelType.GuildAnnouncement);
}

export const Perm = {
  CreateInvite: 1n << 0n,
  Administrator: 1n << 3n,
  ManageChannels: 1n << 4n,
  ManageGuild: 1n << 5n,
  ViewChannel: 1n << 10n,
  SendMessages: 1n << 11n,
  ManageMessages: 1n << 13n,
  ReadHistory: 1n << 16n,
  MentionEveryone: 1n << 17n,
  ManageRoles: 1n << 28n,
  ManageThreads: 1n << 34n,
  CreatePublicThreads: 1n << 35n,
  CreatePrivateThreads: 1n << 36n,
  SendMessagesInThreads: 1n << 38n,
} as const;

// compareIds orders snowflakes (decimal strings) numerically.
export function compareIds(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

// displayName lives with the formatting the boot script shares.
export { displayName } from "./format";
