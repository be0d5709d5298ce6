"""Drive ComfyUI's front end in headless Chromium (Debian's) with Playwright; report what the page shows.

Run by the host suite with the HOST's interpreter (it has ``playwright``; no browser is downloaded):

    MASC_COMFYUI_PYTHON browser.py PLAN.json RESULT.json

PLAN: ``url``, ``out`` (screenshots), ``pack`` (the pack's folder name), ``workflows`` (a list of
``{"name", "path", "run", "thumbnail": path or null, "pick": tile positions to click in MaSC Pick's dialog, or null}``), ``widgets`` (how to make a graph run on this
machine: ``{"byType": {type: {widget: value}}, "byWidget": {widget: value}, "atMost": {widget: number}}``),
``templates`` (open the templates browser and read the cards of those workflows), ``blueprints`` (subgraph
blueprints to place from the search box: ``{"name", "wire": {input: {"type", "widgets", "slot"}}, "typed": {widget:
value}, "show": [output names]}``), ``help`` (node types whose help panel to open with the Node Info button),
``pick_reload`` (``{"path", "pick"}``: queue that graph, reload the tab while MaSC Pick's dialog is open, pick in the
dialog the reloaded page shows). The page's settings (Vue renderer
or not) come from the server's user folder, written by the test before the page loads.
RESULT: for each workflow, what loaded (unknown node types, widget values, nodes flagged with errors), what ran
(the outcome, the text and images the server sent to each node),
the report boxes (text, read-only, label, every line visible, what typing did), what the saved
workflow and the queued prompt hold, nodes that overlap, screenshots; the front end's version and
the console's warnings. Assertions live in the tests, not here.
"""

from __future__ import annotations

import json
import os
import sys
import time

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1600, "height": 1000}
REPORT_WIDGET = "masc_report"

# Helpers installed in the page. Test code: it may use anything the page has.
PAGE_HELPERS = r"""
window.__masc = {
  nodes() { return app.graph._nodes ?? app.graph.nodes; },
  // Every node, those inside subgraph nodes included (a blueprint's inner nodes hold the model widgets).
  allNodes(nodes = this.nodes()) { return nodes.flatMap(n => [n, ...(n.subgraph ? this.allNodes(n.subgraph.nodes) : [])]); },
  // A subgraph node's type is the id of a subgraph the file defines itself (known once the file is loaded).
  unknownTypes(graph) {
    const own = new Set((graph.definitions?.subgraphs ?? []).map(s => s.id));
    return graph.nodes.map(n => n.type).filter(t => !own.has(t) && !(t in LiteGraph.registered_node_types));
  },
  flagged() { return this.nodes().filter(n => n.has_errors).map(n => `${n.id} ${n.type}`); },
  // rules: {byType: {type: {widget: value}}, byWidget: {widget: value}, atMost: {widget: number}}
  // (what graphs.for_cpu does to API graphs)
  setWidgets(rules) {
    for (const node of this.allNodes()) {
      const values = {};
      for (const widget of node.widgets ?? []) {
        if (widget.name in (rules.byWidget ?? {})) values[widget.name] = rules.byWidget[widget.name];
        const most = rules.atMost?.[widget.name];
        if (typeof most === 'number' && typeof widget.value === 'number') values[widget.name] = Math.min(widget.value, most);
      }
      Object.assign(values, rules.byType?.[node.type] ?? {});  // a node type's own rule wins (Train LoRA's steps)
      for (const [name, value] of Object.entries(values)) {
        const widget = node.widgets?.find(w => w.name === name);
        if (widget) widget.value = value;
      }
    }
  },
  // Node rectangles in graph units (classic) or page pixels (Vue), title bar included.
  rectangles(vue) {
    if (vue) {
      return [...document.querySelectorAll('[data-node-id]')].filter(e => e.offsetParent !== null).map(e => {
        const r = e.getBoundingClientRect();
        return {id: e.getAttribute('data-node-id'), x: r.x, y: r.y, w: r.width, h: r.height};
      });
    }
    return this.nodes().map(n => { const b = n.getBounding(); return {id: String(n.id), type: n.type, x: b[0], y: b[1], w: b[2], h: b[3]}; });
  },
  overlaps(vue) {
    const rects = this.rectangles(vue), found = [];
    for (let i = 0; i < rects.length; i++) for (let j = i + 1; j < rects.length; j++) {
      const a = rects[i], b = rects[j];
      const dx = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x), dy = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
      if (dx > 1 && dy > 1) found.push(`${a.id} and ${b.id} overlap by ${Math.round(dx)}x${Math.round(dy)}`);
    }
    return found;
  },
  resetView() { app.canvas.ds.scale = 1; app.canvas.ds.offset[0] = 0; app.canvas.ds.offset[1] = 0; app.canvas.setDirty(true, true); },
  async show(node) {  // centre the view on a node at full size and draw it (DOM widgets off screen are hidden)
    const ds = app.canvas.ds, canvas = app.canvas.canvas.getBoundingClientRect();
    ds.scale = 1;
    ds.offset[0] = canvas.width / 2 - (node.pos[0] + node.size[0] / 2);
    ds.offset[1] = canvas.height / 2 - (node.pos[1] + node.size[1] / 2);
    app.canvas.setDirty(true, true);
    app.canvas.draw(true, true);
    await new Promise(resolve => setTimeout(resolve, 200));
  },
  // Draw every node once at full size: previews load and nodes take their final size only when drawn.
  async visitAll() {
    for (const node of this.nodes()) await this.show(node);
  },
  // Show the given nodes (all when none) inside a page region, at a scale where text is still drawn:
  // top-left aligned when they do not fit at that scale.
  fit(region, ids, minScale) {
    const rects = this.rectangles(false).filter(r => !ids?.length || ids.includes(r.id)), m = 30;
    const x0 = Math.min(...rects.map(r => r.x)) - m, y0 = Math.min(...rects.map(r => r.y)) - m;
    const x1 = Math.max(...rects.map(r => r.x + r.w)) + m, y1 = Math.max(...rects.map(r => r.y + r.h)) + m;
    const canvas = app.canvas.canvas.getBoundingClientRect();
    const scale = Math.min(1, Math.max(minScale, Math.min(region.width / (x1 - x0), region.height / (y1 - y0))));
    const padX = Math.max(0, (region.width - (x1 - x0) * scale) / 2), padY = Math.max(0, (region.height - (y1 - y0) * scale) / 2);
    const ds = app.canvas.ds;
    ds.scale = scale;
    ds.offset[0] = (region.x - canvas.x + padX) / scale - x0;
    ds.offset[1] = (region.y - canvas.y + padY) / scale - y0;
    app.canvas.setDirty(true, true);
    app.canvas.draw(true, true);
  },
  async reports() {
    const out = {};
    for (const node of this.nodes()) {
      const widget = node.widgets?.find(w => w.name === '%WIDGET%');
      if (!widget) continue;
      await this.show(node);
      const box = widget.element;
      out[String(node.id)] = {
        type: node.type, value: widget.value, label: widget.label ?? null,
        readOnly: !!box?.readOnly, ariaLabel: box?.getAttribute('aria-label') ?? null,
        shown: !!box && box.isConnected && box.offsetParent !== null,
        clientHeight: box?.clientHeight ?? 0, scrollHeight: box?.scrollHeight ?? 0,
      };
    }
    return out;
  },
  async saved() {  // what "Save" writes and what "Run" sends
    const workflow = app.graph.serialize();
    const prompt = await app.graphToPrompt();
    return {
      workflow: JSON.stringify(workflow), prompt: JSON.stringify(prompt.output),
      nodes: workflow.nodes.map(n => ({id: String(n.id), type: n.type, widgets_values: n.widgets_values ?? null})),
    };
  },
};
""".replace("%WIDGET%", REPORT_WIDGET)


def open_page(browser, url: str):
    page = browser.new_page(viewport=VIEWPORT)
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.goto(url + "/", wait_until="load", timeout=120_000)
    page.wait_for_function(
        "() => window.app && window.app.graph && window.LiteGraph && window.app.canvas", timeout=120_000
    )
    page.wait_for_timeout(2000)
    page.evaluate(PAGE_HELPERS)
    return page, console


def queue_and_wait(page, timeout_s: float = 900, pick: list[int] | None = None, shots: str | None = None) -> dict:
    """Queue the graph as the Run button does (one press); the outcome, the ui text and images the server sent.

    ``timeout_s`` is a stall, not a run length: the clock restarts at every message from the server (a sampler
    step, a node starting, a preview), so a loaded machine makes a run slower, never a failure. After a stall the
    run is interrupted and the queue cleared, so the next workflow neither waits behind it nor receives its
    messages (ids shared between workflows would land on the wrong node).

    ``pick``: when MaSC Pick's dialog opens, click these tiles (positions among those shown) with the mouse and
    press Keep selected; what the dialog showed is returned under ``dialog`` (screenshot at ``shots``-pick.png).
    """
    page.evaluate(
        """(timeout) => {
            window.__mascSettled = false;
            window.__mascRun = (async () => {
                const { api } = await import('/scripts/api.js');
                const sent = {}, images = {}, progress = {}, previews = {};
                const onExecuted = e => {
                    const output = e.detail?.output;
                    if (output?.text) sent[String(e.detail.node)] = output.text;
                    if (output?.images) images[String(e.detail.node)] = output.images;
                };
                // What a node shows while it runs: core's progress text and its previews (with their node's id).
                const onText = e => { const id = String(e.detail?.nodeId ?? ''); (progress[id] ||= []).push(String(e.detail?.text ?? '')); };
                const onPreview = e => { const id = String(e.detail?.nodeId ?? ''); previews[id] = (previews[id] || 0) + 1; };
                api.addEventListener('executed', onExecuted);
                api.addEventListener('progress_text', onText);
                api.addEventListener('b_preview_with_metadata', onPreview);
                let quiet, settle;  // settle: the promise's resolve, set below; a stall calls it with 'timeout'
                const alive = () => { clearTimeout(quiet); quiet = setTimeout(() => settle('timeout'), timeout); };
                const heard = ['executing', 'executed', 'progress', 'progress_state', 'progress_text',
                               'b_preview', 'b_preview_with_metadata', 'execution_cached'];
                const outcome = await new Promise(resolve => {
                    settle = resolve;
                    heard.forEach(type => api.addEventListener(type, alive));
                    api.addEventListener('execution_success', () => resolve('success'));
                    api.addEventListener('execution_error', e => resolve('error: ' + JSON.stringify(e.detail).slice(0, 2000)));
                    api.addEventListener('execution_interrupted', () => resolve('interrupted'));
                    alive();
                    app.queuePrompt(0, 1);
                });
                clearTimeout(quiet);
                window.__mascSettled = true;
                heard.forEach(type => api.removeEventListener(type, alive));
                api.removeEventListener('executed', onExecuted);
                api.removeEventListener('progress_text', onText);
                api.removeEventListener('b_preview_with_metadata', onPreview);
                if (outcome === 'timeout') {
                    await fetch('/api/queue', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                               body: JSON.stringify({clear: true})});
                    await fetch('/api/interrupt', {method: 'POST'});
                }
                return {outcome, sent, images, progress, previews};
            })();
        }""",
        timeout_s * 1000,
    )
    dialog = None
    if pick is not None:
        # The dialog opens when MaSC Pick runs, after the sampling: wait while the run goes on (its own stall
        # clock ends a silent one); a run that ends without opening the dialog returns no dialog.
        page.wait_for_function(
            "() => document.querySelector('.masc-pick [data-position]') || window.__mascSettled",
            timeout=0,
            polling=1000,
        )
    if pick is not None and page.query_selector(".masc-pick [data-position]"):
        page.wait_for_function(
            "() => [...document.querySelectorAll('.masc-pick img')].every(i => i.complete && i.naturalWidth > 0)",
            timeout=60_000,
        )
        dialog = page.evaluate(
            """() => {
                const root = document.querySelector('.masc-pick');
                return {node: root.dataset.node, role: root.getAttribute('role'),
                        tiles: [...root.querySelectorAll('[data-position]')].map(t => t.innerText),
                        buttons: [...root.querySelectorAll('button')].map(b => b.dataset.action)};
            }"""
        )
        for position in pick:
            page.click(f".masc-pick [data-position='{position}']")
        dialog["pressed"] = page.evaluate(
            "() => [...document.querySelectorAll('.masc-pick [aria-pressed=true]')].map(t => "
            "Number(t.dataset.position))"
        )
        if shots:
            page.screenshot(path=shots + "-pick.png")
        page.click(".masc-pick button[data-action='keep']")
        page.wait_for_selector(".masc-pick", state="detached", timeout=60_000)
    ran = page.evaluate("async () => await window.__mascRun")
    ran["dialog"] = dialog
    if ran["outcome"] == "timeout":
        ran["outcome"] = f"timeout: no message from the server for {timeout_s:.0f} s"
        _wait_until_idle(page)
    return ran


def _wait_until_idle(page, limit_s: float = 600) -> None:
    """Until the server's queue is empty (an interrupted run ends at its next interrupt check).

    A server still busy after ``limit_s`` ends the session with one line: the next workflow would receive the
    stalled run's messages on its own node ids and fail for reasons it never had.
    """
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        busy = page.evaluate(
            "async () => { const q = await (await fetch('/api/queue')).json();"
            " return q.queue_running.length + q.queue_pending.length; }"
        )
        if not busy:
            return
        page.wait_for_timeout(2000)
    raise SystemExit(
        f"browser session stopped: a stalled run was interrupted, but the server was still running it "
        f"{limit_s:.0f} s later (see the server's log)"
    )


def vue_reports(page, node_ids: list[str]) -> dict:
    """The report boxes as the Vue renderer shows them, and what typing into one does."""
    found = {}
    for node_id in node_ids:
        node = page.locator(f'[data-node-id="{node_id}"]')
        box = node.locator("textarea.masc-report")
        entry = {"present": box.count() == 1, "node_text": node.inner_text() if node.count() else ""}
        if entry["present"]:
            before = box.input_value()
            box.scroll_into_view_if_needed()
            entry["covered_by"] = box.evaluate(  # another node drawn over the box's centre (toasts do not count)
                """e => { const r = e.getBoundingClientRect(), hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
                          const owner = hit?.closest('[data-node-id]'), mine = e.closest('[data-node-id]');
                          return owner && owner !== mine ? `node ${owner.getAttribute('data-node-id')}` : null; }"""
            )
            box.focus()
            page.keyboard.type("typed")
            page.keyboard.press("Backspace")
            entry.update(
                value=before,
                after_typing=box.input_value(),
                readOnly=box.evaluate("e => e.readOnly"),
                accessible_name=box.get_attribute("aria-label"),
                every_line_visible=box.evaluate("e => e.scrollHeight <= e.clientHeight + 1"),
            )
        found[node_id] = entry
    return found


def preview_any_texts(page) -> dict:
    """What core's Preview Any nodes show in the Vue renderer (to tell a renderer that shows no text at all)."""
    return page.evaluate(
        """() => Object.fromEntries(window.__masc.nodes().filter(n => n.type === 'PreviewAny').map(n => {
            const area = document.querySelector(`[data-node-id="${n.id}"] textarea`);
            return [String(n.id), area ? area.value : null];
        }))"""
    )


def thumbnail(page, target: str, focus: list[str]) -> None:
    """The workflow after its run (or as opened), framed on its MaSC nodes that reported, saved as the template's JPEG."""
    from PIL import Image

    region = {"x": 90, "y": 100, "width": 860, "height": 860}
    page.evaluate("([region, ids]) => window.__masc.fit(region, ids, 0.62)", [region, focus])
    page.wait_for_timeout(1000)
    shot = target + ".png"
    page.screenshot(path=shot, clip=region)
    Image.open(shot).convert("RGB").resize((768, 768), Image.LANCZOS).save(target, "JPEG", quality=80, optimize=True)
    os.remove(shot)


def check_workflow(page, item: dict, widgets: dict, out: str, vue: bool) -> dict:
    with open(item["path"], encoding="utf-8") as handle:
        graph = json.load(handle)
    result = {"unknown_types": page.evaluate("(g) => window.__masc.unknownTypes(g)", graph)}
    page.evaluate("async (g) => { await app.loadGraphData(g); }", graph)
    page.wait_for_timeout(1500)
    # The nodes inside subgraph definitions too, as "<subgraph id>/<node id>" (a folded generator's widgets).
    result["widgets_on_load"] = page.evaluate(
        """() => { const s = app.graph.serialize();
            const entry = (n, id) => ({id, type: n.type, widgets_values: n.widgets_values ?? null});
            return [...s.nodes.map(n => entry(n, String(n.id))),
                    ...(s.definitions?.subgraphs ?? []).flatMap(g => g.nodes.map(n => entry(n, `${g.id}/${n.id}`)))]; }"""
    )
    result["flagged_on_load"] = page.evaluate("() => window.__masc.flagged()")
    result["node_count"] = page.evaluate("() => window.__masc.nodes().length")
    result["file_node_count"] = len(graph["nodes"])
    page.evaluate("async () => await window.__masc.visitAll()")
    result["overlaps_on_load"] = page.evaluate("(v) => window.__masc.overlaps(v)", vue)
    stem = os.path.join(out, item["name"] + ("-vue" if vue else ""))
    page.screenshot(path=stem + "-loaded.png")
    if not item.get("run"):
        # A template whose models cannot exist here (the DiT ones' text encoders): its card shows it as opened,
        # framed on its MaSC nodes (it runs end to end through the API in test_templates.py).
        if item.get("thumbnail"):
            page.keyboard.press("Escape")
            thumbnail(page, item["thumbnail"], [str(n["id"]) for n in graph["nodes"] if n["type"].startswith("MaSC")])
        return result
    page.evaluate("(w) => window.__masc.setWidgets(w)", widgets)
    started = time.monotonic()
    ran = queue_and_wait(page, pick=item.get("pick"), shots=stem)
    result["run"], result["sent_text"], result["sent_images"] = ran["outcome"], ran["sent"], ran["images"]
    result["pick_dialog"] = ran["dialog"]
    result["progress_text"], result["previews_by_node"] = ran.get("progress", {}), ran.get("previews", {})
    result["run_seconds"] = round(time.monotonic() - started, 1)
    page.wait_for_timeout(2500)  # previews arrive after the execution message
    page.evaluate("async () => { await window.__masc.visitAll(); await window.__masc.visitAll(); }")
    result["overlaps_after_run"] = page.evaluate("(v) => window.__masc.overlaps(v)", vue)
    result["rectangles_after_run"] = page.evaluate("(v) => window.__masc.rectangles(v)", vue)
    result["reports"] = page.evaluate("async () => await window.__masc.reports()")
    result["saved"] = page.evaluate("async () => await window.__masc.saved()")
    page.screenshot(path=stem + "-ran.png")
    if vue:
        result["vue_reports"] = vue_reports(page, list(result["reports"]))
        result["preview_any"] = preview_any_texts(page)
    if item.get("thumbnail"):
        thumbnail(page, item["thumbnail"], list(result["reports"]))
    return result


def check_templates(page, pack: str, names: list[str], out: str) -> dict:
    """Open the templates browser on our pack: the cards' order and the width of the picture each shows.

    Cards are found by their titles (the workflow names); a card is the largest ancestor of a title that
    holds no other title. Front ends load thumbnails through object URLs, so the <img> source is not used.
    """
    page.evaluate("async () => { await app.extensionManager.command.execute('Comfy.BrowseTemplates'); }")
    page.wait_for_timeout(2500)
    page.get_by_text(pack, exact=True).last.click()
    page.wait_for_timeout(3500)
    page.screenshot(path=os.path.join(out, "templates.png"))
    # Front ends load a card's picture only while it is in view (1.27 showed 6 of 7 cards unscrolled, and dropped the
    # first one's picture once the last was scrolled to): bring each card into view and read it there.
    cards = page.evaluate(
        """async (names) => {
            const titles = [...document.querySelectorAll('body *')]
                .filter(e => e.children.length === 0 && names.includes(e.textContent.trim()));
            const first = names.map(n => titles.find(e => e.textContent.trim() === n)).filter(Boolean);
            first.sort((a, b) => (a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING) ? -1 : 1);
            const holds = (e) => titles.filter(t => e.contains(t)).length;
            const found = [];
            for (const title of first) {
                let card = title;
                while (card.parentElement && holds(card.parentElement) === 1) card = card.parentElement;
                card.scrollIntoView({block: 'center'});
                let img = null, shown = false;
                for (let wait = 0; wait < 300 && !shown; wait++) {  // until the picture arrives (30 s at most)
                    await new Promise(r => setTimeout(r, 100));
                    img = card.querySelector('img');
                    shown = !!img && img.complete && img.naturalWidth > 0;
                }
                found.push({name: title.textContent.trim(), width: shown ? img.naturalWidth : 0,
                            placeholder: shown && /default-template/.test(img.src)});
            }
            return found;
        }""",
        names,
    )
    page.keyboard.press("Escape")
    return {"cards": cards}


def main(plan_path: str, result_path: str) -> None:
    from playwright.sync_api import sync_playwright

    with open(plan_path, encoding="utf-8") as handle:
        plan = json.load(handle)
    os.makedirs(plan["out"], exist_ok=True)
    result = {"workflows": {}}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS, headless=True)
        page, console = open_page(browser, plan["url"])
        result["frontend"] = page.evaluate("() => window.__COMFYUI_FRONTEND_VERSION__ ?? null")
        result["vue"] = page.evaluate("() => app.extensionManager.setting.get('Comfy.VueNodes.Enabled') ?? null")
        result["node_titles"] = page.evaluate(
            "() => Object.fromEntries(Object.entries(LiteGraph.registered_node_types)"
            ".filter(([type]) => type.startsWith('MaSC')).map(([type, cls]) => [type, cls.title]))"
        )
        if plan.get("templates"):
            names = [item["name"] for item in plan.get("workflows", []) if not item.get("saved")]  # the templates
            result["templates"] = check_templates(page, plan["pack"], names, plan["out"])
            from browser_places import open_templates  # beside this script

            result["templates"]["opened"] = open_templates(page, plan["pack"], names, plan["out"])
        for item in plan.get("workflows", []):
            checked = check_workflow(page, item, plan.get("widgets", {}), plan["out"], bool(result["vue"]))
            result["workflows"][item["name"]] = checked
            if result["vue"] and checked.get("preview_any") and not any(checked["preview_any"].values()):
                break  # this Vue renderer shows no node text at all: the rest would show nothing either
        # After the workflows (their screenshots and thumbnails are taken with no side panel open).
        from browser_places import (
            blueprint_defs,
            check_blueprint,
            check_help,
            check_pick_after_reload,
        )  # beside this script

        if plan.get("blueprints") is not None:
            result["blueprint_defs"] = listed = blueprint_defs(page) or {}
            result["blueprints"] = {
                item["name"]: check_blueprint(page, item, plan.get("widgets", {}), plan["out"])
                for item in plan["blueprints"]
                if item["name"] in listed
            }  # none before 0.33
        if plan.get("help"):
            result["help"] = {}
            for node_type in plan["help"]:
                opened = (
                    check_help(page, node_type, plan["out"])
                    if result["help"].get("_button", True)
                    else {"button": False}
                )
                result["help"][node_type] = opened
                result["help"]["_button"] = opened["button"]  # a front end without the button: not tried again
            result["help"].pop("_button")
        if plan.get("pick_reload"):  # last: the reload drops the page's helpers
            result["pick_reload"] = check_pick_after_reload(
                page, plan["pick_reload"], plan.get("widgets", {}), plan["out"]
            )
        result["console"] = console
        browser.close()
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
