// MaSC for ComfyUI: show each MaSC node's text report (per-image scores) on the node, read-only.
//
// The stock front end shows a node's ui.images but not its ui.text. This adds a read-only text box
// with the front end's public API only (app.registerExtension, LGraphNode.addDOMWidget, api): the
// same code runs in front end 1.27 (ComfyUI 0.3.64), in 1.49 (0.33) and in 1.49's Vue node renderer.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";

const WIDGET_NAME = "masc_report";
const LABEL = "report";
const LINE_HEIGHT = 16; // px, matches the font below
const CHAR_WIDTH = 7.3; // px of a 12 px monospace character
const PADDING = 6; // px between the box's border and the text
const MARGIN = 10; // px the front end keeps around a DOM widget (its default)
const MIN_LINES = 2;
const MAX_LINES = 40; // a Sample Until report of 16 candidates fits whole; longer ones scroll
const MAX_COLUMNS = 96; // characters; the candidate tables are narrower, longer prose lines wrap
const TABLE_ROW = /^\s*(cand\b|\d+\s)/; // a candidate row or the table's header: never wrapped

// Characters per line the box shows: the widest table row (or the widest line, for a report without a table),
// at most MAX_COLUMNS. Prose wider than that wraps inside the box instead of scrolling sideways.
function columns(text) {
  const lines = text ? text.split("\n") : [""];
  const rows = lines.filter((line) => TABLE_ROW.test(line));
  const widest = Math.max(...(rows.length ? rows : lines).map((line) => line.length), 24);
  return Math.min(MAX_COLUMNS, widest);
}

// Lines as the box shows them: each report line, wrapped at the box's columns.
function lineCount(text) {
  const width = columns(text);
  const shown = text ? text.split("\n").reduce((sum, line) => sum + Math.max(1, Math.ceil(line.length / width)), 0) : 0;
  return Math.min(MAX_LINES, Math.max(MIN_LINES, shown));
}

// Height of the text box: every line visible (up to MAX_LINES), plus its padding and border.
function textHeight(text) {
  return lineCount(text) * LINE_HEIGHT + 2 * PADDING + 2;
}

// Height of the widget in the classic renderer, which sizes DOM widgets itself (margin included).
function boxHeight(text) {
  return textHeight(text) + 2 * MARGIN;
}

function reportBox(node) {
  const existing = node.widgets?.find((w) => w.name === WIDGET_NAME);
  if (existing) return existing;
  const area = document.createElement("textarea");
  area.readOnly = true; // output, not a setting: typing must not change it
  area.spellcheck = false;
  area.placeholder = "Scores appear here after a run.";
  area.setAttribute("aria-label", LABEL);
  area.className = "comfy-multiline-input masc-report";
  Object.assign(area.style, {
    fontFamily: "monospace",
    fontSize: "12px",
    lineHeight: `${LINE_HEIGHT}px`,
    whiteSpace: "pre-wrap", // table rows fit the box; only prose wider than it wraps
    overflowWrap: "anywhere",
    overflow: "auto",
    resize: "none",
    boxSizing: "border-box",
    padding: `${PADDING}px`,
    opacity: "0.9",
  });
  let text = "";
  const widget = node.addDOMWidget(WIDGET_NAME, "masc_report", area, {
    serialize: false, // never saved into workflows or prompts
    getValue: () => text,
    setValue: (value) => {
      text = typeof value === "string" ? value : "";
      area.value = text;
      // The Vue renderer lays DOM widgets out in the page flow: the box sizes itself.
      area.rows = lineCount(text);
      area.style.minHeight = `${textHeight(text)}px`;
    },
    margin: MARGIN,
    getMinHeight: () => boxHeight(text),
    getMaxHeight: () => boxHeight(text),
  });
  widget.label = LABEL;
  widget.serialize = false;
  return widget;
}

function showReport(node, text) {
  const widget = reportBox(node);
  widget.value = text;
  const width = Math.ceil(columns(text) * CHAR_WIDTH) + 2 * (PADDING + MARGIN) + 20;
  const fitted = node.computeSize();
  node.setSize([Math.max(node.size[0], fitted[0], width), Math.max(node.size[1], fitted[1])]);
  node.setDirtyCanvas?.(true, true);
}

// The templates browser lists a pack's workflows in the server's directory order (2, 5, 1, 4, 3 on one
// Linux file system); list ours by name, so 1..5 read in order.
const PACK = decodeURIComponent((import.meta.url.split("/extensions/")[1] || "").split("/")[0]);
const listTemplates = api.getWorkflowTemplates;
if (PACK && typeof listTemplates === "function") {
  api.getWorkflowTemplates = async function (...args) {
    const templates = await listTemplates.apply(this, args);
    if (Array.isArray(templates?.[PACK])) {
      templates[PACK] = [...templates[PACK]].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    }
    return templates;
  };
}

app.registerExtension({
  name: "masc.ShowReports",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!nodeData.name?.startsWith("MaSC")) return;
    const onExecuted = nodeType.prototype.onExecuted;
    nodeType.prototype.onExecuted = function (message) {
      onExecuted?.apply(this, arguments);
      const text = message?.text;
      if (Array.isArray(text) && text.length) showReport(this, text.join("\n"));
    };
  },
});
