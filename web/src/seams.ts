// Extension points for the parts of the client built separately (voice,
// live comments): they register here, from their own modules imported by
// main.tsx, instead of editing the chat views.
//
//   - onDispatch: see every gateway dispatch (VOICE_STATE_UPDATE,
//     VOICE_SERVER_UPDATE, ...); send ops with gateway().send (client.ts).
//   - registerChannelView: the main pane for a channel type (2, voice, is
//     a placeholder until a voice view registers).
//   - registerPanel: a panel above the user bar (for "Voice Connected").
//   - registerRoute: a page for a path (the live viewer at /live/<id>),
//     public when it needs no login.

import type { ComponentType } from "preact";
import type { Channel } from "./types";

export type DispatchListener = (t: string, d: any) => void;

export const dispatchListeners = new Set<DispatchListener>();

export function onDispatch(fn: DispatchListener): () => void {
  dispatchListeners.add(fn);
  return () => dispatchListeners.delete(fn);
}

export interface ChannelViewProps {
  channel: Channel;
  guildId: string | null;
}

export const channelViews = new Map<number, ComponentType<ChannelViewProps>>();

export function registerChannelView(channelType: number, view: ComponentType<ChannelViewProps>) {
  channelViews.set(channelType, view);
}

export const panels: ComponentType<{}>[] = [];

export function registerPanel(panel: ComponentType<{}>) {
  panels.push(panel);
}

export interface RouteView {
  // prefix is the first path segment ("live" for /live/<id>).
  prefix: string;
  view: ComponentType<{ parts: string[] }>;
  // public routes render without a login.
  public?: boolean;
}

export const routeViews: RouteView[] = [];

export function registerRoute(r: RouteView) {
  routeViews.push(r);
}
