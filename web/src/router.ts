// A tiny history-API router: the app's state is the URL path.
//
//   /channels/@me[/<channel>]            direct messages
//   /channels/<guild>[/<channel>[/<msg>]] a guild channel, optionally at a message
//   /invite/<code>                        an invite
//   /live/<stream>                        a live stream (registered by seams.ts)

export interface Route {
  path: string;
  parts: string[];
}

let current: Route = parse(location.pathname);
const listeners = new Set<() => void>();

function parse(path: string): Route {
  return { path, parts: path.split("/").filter(Boolean).map(decodeURIComponent) };
}

export function route(): Route {
  return current;
}

export function onRoute(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function navigate(path: string, replace = false) {
  if (path === current.path) return;
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  current = parse(path);
  for (const fn of listeners) fn();
}

window.addEventListener("popstate", () => {
  current = parse(location.pathname);
  for (const fn of listeners) fn();
});

// linkClick makes an <a href> navigate inside the app on a plain click.
export function linkClick(e: MouseEvent) {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.currentTarget as HTMLAnchorElement | null) ?? null;
  const href = a?.getAttribute("href");
  if (!href || !href.startsWith("/")) return;
  e.preventDefault();
  navigate(href);
}
