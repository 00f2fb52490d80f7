// Entry point of Concord's web client.
import { h, render } from "preact";
import "./app.css";
import { gateway, savedToken, start } from "./client";
import { App } from "./ui/App";
import "./live";
import "./voice";

const token = savedToken();
if (token) start(token);

// A handle for debugging from the console (and the browser tests): drop
// the gateway socket as a network failure would, to watch it resume.
(window as any).concordDebug = { dropSocket: () => gateway()?.drop() };

render(<App />, document.getElementById("app")!);
