// MaSC for ComfyUI: MaSC Pick's dialog. The server sends "masc.pick" to the tab that queued the prompt; this shows the
// candidates with their scores (and heatmaps on demand), lets the artist choose one or several, and posts the choice
// to /masc/pick. The server checks everything it receives (masc_core/selection/picks.py); the dialog closes on "masc.pick.closed"
// (answered, timed out or cancelled), so it never outlives the wait. Plain DOM and the front end's public api only:
// the same code runs in front end 1.27, 1.49 and 1.58.
//
// The event names and routes come from the server (GET /masc/pick/config), the one place they are written; so does
// the default pick ("default" in each request). The server asks only a page that said it can answer: this script
// announces its client id to the hello route when it loads and whenever the websocket reconnects. A reloaded tab keeps its client id (the front end keeps it in
// sessionStorage), so the server sees the announcement and shows the open pick again; any other websocket client (an
// API script) is never asked and gets the default at once.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";

const DIALOG_CLASS = "masc-pick";
const CONFIG_ROUTE = "/masc/pick/config";
let config = null; // {events: {show, closed}, routes: {answer, hello}}, from the server
let open = null; // {token, root, timer}

function viewUrl(image) {
  const query = new URLSearchParams({ filename: image.filename, subfolder: image.subfolder ?? "", type: image.type ?? "temp" });
  return api.apiURL(`/view?${query}`);
}

function element(tag, style = {}, text = "") {
  const node = document.createElement(tag);
  Object.assign(node.style, style);
  if (text) node.textContent = text;
  return node;
}

function close(token) {
  if (!open || (token && open.token !== token)) return;
  clearInterval(open.timer);
  open.root.remove();
  open = null;
}

function button(label, onClick, primary = false) {
  const node = element("button", {
    padding: "6px 14px", borderRadius: "6px", border: "1px solid #666", cursor: "pointer", fontSize: "14px",
    background: primary ? "#2f7d45" : "#333", color: "#eee",
  }, label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

async function send(detail, picks, status) {
  status.textContent = "sending…";
  try {
    const response = await api.fetchApi(config.routes.answer, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: detail.token, node: detail.node, picks }),
    });
    if (response.ok) {
      status.textContent = "sent; the graph goes on";
      close(detail.token);
      return;
    }
    const answer = await response.json().catch(() => ({}));
    status.textContent = answer.error ?? `the server refused the pick (${response.status})`;
  } catch (error) {
    status.textContent = `could not reach the server: ${error}`;
  }
}

let announced = null; // {client, socket}: what the server was last told

function announce(force = false) {
  const client = api.clientId;
  if (!config || !client || (!force && announced?.client === client && announced?.socket === api.socket)) return;
  announced = { client, socket: api.socket };
  api.fetchApi(config.routes.hello, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client }),
  }).catch(() => { announced = null; }); // try again on the next status message
}

function show(detail) {
  if (open && open.token === detail.token) return; // shown again after a reconnect: this page still has it
  close();
  const root = element("div", {
    position: "fixed", inset: "0", zIndex: "10000", background: "rgba(0,0,0,0.7)", display: "flex",
    alignItems: "center", justifyContent: "center", fontFamily: "sans-serif",
  });
  root.className = DIALOG_CLASS;
  root.setAttribute("role", "dialog");
  root.setAttribute("aria-label", "MaSC Pick");
  root.dataset.node = detail.node;
  const panel = element("div", {
    background: "#222", color: "#eee", borderRadius: "10px", padding: "16px", maxWidth: "92vw", maxHeight: "90vh",
    overflow: "auto", boxShadow: "0 4px 24px #000",
  });
  const title = element("div", { fontSize: "16px", marginBottom: "8px" },
    `MaSC Pick (node ${detail.node}): click the candidates to keep, then Keep selected`);
  const grid = element("div", { display: "flex", flexWrap: "wrap", gap: "10px" });
  const chosen = new Set();
  let heatmaps = false;
  const keepButton = button("Keep selected (0)", () => send(detail, [...chosen].sort((a, b) => a - b), status), true);
  keepButton.disabled = true;
  keepButton.dataset.action = "keep";
  const pictures = [];
  detail.images.forEach((image, position) => {
    const tile = element("div", {
      width: "220px", border: "3px solid transparent", borderRadius: "6px", padding: "4px", cursor: "pointer", background: "#2a2a2a",
    });
    tile.dataset.position = String(position);
    tile.setAttribute("role", "button");
    tile.setAttribute("aria-pressed", "false");
    const picture = element("img", { width: "100%", display: "block", borderRadius: "4px" });
    picture.src = viewUrl(image);
    picture.alt = `candidate #${detail.indices[position]}`;
    pictures.push(picture);
    tile.append(picture);
    for (const line of detail.captions[position] ?? []) {
      tile.append(element("div", { fontFamily: "monospace", fontSize: "12px", marginTop: "2px" }, line));
    }
    tile.addEventListener("click", () => {
      if (chosen.has(position)) chosen.delete(position); else chosen.add(position);
      const on = chosen.has(position);
      tile.style.borderColor = on ? "#40c860" : "transparent";
      tile.setAttribute("aria-pressed", String(on));
      keepButton.textContent = `Keep selected (${chosen.size})`;
      keepButton.disabled = chosen.size === 0;
    });
    grid.append(tile);
  });
  const status = element("div", { fontSize: "13px", marginTop: "8px", minHeight: "18px" });
  const bar = element("div", { display: "flex", gap: "8px", marginTop: "12px", alignItems: "center", flexWrap: "wrap" });
  const best = detail.keep === 1 ? "the best by score" : `the best ${detail.keep} by score`;
  const defaultButton = button(`Keep ${best}`, () => send(detail, detail.default, status));
  defaultButton.dataset.action = "default";
  bar.append(keepButton, defaultButton);
  if (detail.heatmaps?.length === detail.images.length) {
    const heatmapButton = button("Show heatmaps", () => {
      heatmaps = !heatmaps;
      pictures.forEach((picture, position) => { picture.src = viewUrl(heatmaps ? detail.heatmaps[position] : detail.images[position]); });
      heatmapButton.textContent = heatmaps ? "Show images" : "Show heatmaps";
    });
    heatmapButton.dataset.action = "heatmaps";
    bar.append(heatmapButton);
  }
  const cancelButton = button("Cancel the run", () => { api.fetchApi("/interrupt", { method: "POST" }); });
  cancelButton.dataset.action = "cancel";
  const countdown = element("span", { marginLeft: "auto", fontSize: "13px", opacity: "0.8" });
  bar.append(cancelButton, countdown);
  panel.append(title, grid, bar, status);
  root.append(panel);
  document.body.append(root);
  const deadline = Date.now() + detail.timeout * 1000;
  const tick = () => {
    const left = Math.max(0, Math.round((deadline - Date.now()) / 1000));
    countdown.textContent = `${best} kept in ${left} s if you do not pick`;
  };
  tick();
  open = { token: detail.token, root, timer: setInterval(tick, 1000) };
}

app.registerExtension({
  name: "masc.pick",
  async setup() {
    try {
      const response = await api.fetchApi(CONFIG_ROUTE);
      if (!response.ok) return; // a server without the pack's routes: no page is announced, so none is asked
      config = await response.json();
    } catch (error) {
      console.warn(`MaSC Pick: no dialog in this tab (${error})`);
      return;
    }
    // The client id is known once the socket's first status message arrived (before or after this runs).
    api.addEventListener("status", () => announce());
    api.addEventListener("reconnected", () => announce(true));
    announce();
    api.addEventListener(config.events.show, (event) => show(event.detail));
    api.addEventListener(config.events.closed, (event) => close(event.detail?.token));
    api.addEventListener("execution_interrupted", () => close());
    api.addEventListener("execution_error", () => close());
  },
});
