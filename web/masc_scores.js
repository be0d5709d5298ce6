// MaSC for ComfyUI: show each MaSC node's text report (per-image scores) on the node itself.
// The stock front end shows a node's ui.images but not its ui.text; this adds a read-only text box.
import { app } from "../../scripts/app.js";
import { ComfyWidgets } from "../../scripts/widgets.js";

const NODES_WITH_REPORTS = new Set([
  "MaSCConceptPreservation",
  "MaSCPromptFollowing",
  "MaSCScore",
  "MaSCStripSubject",
  "MaSCSelectBest",
  "MaSCGate",
  "MaSCAutoMask",
  "MaSCSampleUntil",
  "MaSCLogScores",
]);
const WIDGET_NAME = "masc_report";

function showReport(node, text) {
  let widget = node.widgets?.find((w) => w.name === WIDGET_NAME);
  if (!widget) {
    widget = ComfyWidgets["STRING"](node, WIDGET_NAME, ["STRING", { multiline: true }], app).widget;
    widget.inputEl.readOnly = true;
    widget.inputEl.style.opacity = 0.85;
    widget.inputEl.style.fontFamily = "monospace";
    // Never saved into workflows or prompts: it is output, not a setting.
    widget.serialize = false;
    widget.options = { ...(widget.options || {}), serialize: false };
  }
  widget.value = text;
  requestAnimationFrame(() => {
    const size = node.computeSize();
    node.setSize([Math.max(node.size[0], size[0]), Math.max(node.size[1], size[1])]);
    app.graph.setDirtyCanvas(true, false);
  });
}

app.registerExtension({
  name: "masc.ShowReports",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!NODES_WITH_REPORTS.has(nodeData.name)) return;
    const onExecuted = nodeType.prototype.onExecuted;
    nodeType.prototype.onExecuted = function (message) {
      onExecuted?.apply(this, arguments);
      const text = message?.text;
      if (text && text.length) showReport(this, text.join("\n"));
    };
  },
});
