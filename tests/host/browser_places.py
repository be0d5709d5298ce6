"""The front end's places a pack fills, driven in the page ``browser.py`` opened: subgraph blueprints placed from the
search box and run, and the help panel the selection toolbox's Node Info button opens.

Used by ``browser.py`` (its plan's ``blueprints`` and ``help``); results only, the assertions live in the tests.
"""

from __future__ import annotations

import os

from browser import queue_and_wait


def blueprint_defs(page) -> dict:
    """The node definitions the front end made from /global_subgraphs (what its library and search list)."""
    return page.evaluate(
        """() => {
            const pinia = document.querySelector('#vue-app')?.__vue_app__?.config.globalProperties.$pinia;
            const store = pinia?._s.get('nodeDef');
            if (!store) return null;
            return Object.fromEntries([...store.nodeDefs].filter(d => d.python_module === 'blueprint').map(d => [d.display_name,
                {name: d.name, category: d.category, description: d.description, search_aliases: d.search_aliases ?? null,
                 inputs: Object.keys(d.inputs ?? {}), outputs: (d.outputs ?? []).map(o => o.name)}]));
        }"""
    )


def place_from_search(page, name: str) -> dict | None:
    """Add a node as a user does: double-click the empty canvas, type its name, press Enter."""
    page.evaluate("() => { app.graph.clear(); window.__masc.resetView(); }")
    page.wait_for_timeout(500)
    canvas = page.evaluate(
        "() => { const r = app.canvas.canvas.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }"
    )
    for _ in range(3):  # the canvas takes a double-click only once it has the focus (a first click may just take it)
        page.keyboard.press("Escape")
        page.mouse.click(*canvas)
        page.wait_for_timeout(300)
        page.mouse.dblclick(*canvas)
        try:
            page.wait_for_function("() => document.activeElement?.tagName === 'INPUT'", timeout=5000)  # the search box
            break
        except Exception:  # noqa: BLE001 - Playwright's TimeoutError: try again
            continue
    else:
        return {"subgraph": False, "found": "the search box did not open"}
    page.wait_for_timeout(500)
    page.keyboard.type(name, delay=20)
    page.wait_for_timeout(1500)
    page.keyboard.press("Enter")
    page.wait_for_timeout(1500)
    placed = page.evaluate(
        """() => window.__masc.nodes().map(n => ({id: String(n.id), title: n.title, subgraph: !!n.subgraph,
            inputs: n.inputs.map(i => i.name), outputs: n.outputs.map(o => o.name), widgets: (n.widgets ?? []).map(w => w.name),
            inner: n.subgraph ? n.subgraph.nodes.map(m => m.type) : []}))"""
    )
    return placed[0] if len(placed) == 1 else {"subgraph": False, "found": placed}


def check_blueprint(page, item: dict, widgets: dict, out: str) -> dict:
    """Place a blueprint from the search box, wire its inputs, show its outputs, run it from the page."""
    placed = place_from_search(page, item["name"])
    result = {"placed": placed}
    if not placed or not placed["subgraph"]:
        return result
    page.evaluate(
        """([id, wire, typed, show]) => {
            const g = app.graph, target = g.getNodeById(Number(id)) ?? g.getNodeById(id);
            let y = 0;
            for (const [input, source] of Object.entries(wire)) {
                const n = LiteGraph.createNode(source.type); n.pos = [target.pos[0] - 420, target.pos[1] + y]; y += 460; g.add(n);
                for (const [k, v] of Object.entries(source.widgets ?? {})) n.widgets.find(w => w.name === k).value = v;
                n.connect(source.slot ?? 0, target, target.findInputSlot(input));
            }
            for (const [name, value] of Object.entries(typed)) target.widgets.find(w => w.name === name).value = value;
            y = 0;
            for (const output of show) {
                const n = LiteGraph.createNode('PreviewAny'); n.pos = [target.pos[0] + target.size[0] + 80, target.pos[1] + y]; y += 160;
                n.title = 'show ' + output; g.add(n); target.connect(target.findOutputSlot(output), n, 0);
            }
            app.canvas.setDirty(true, true);
        }""",
        [placed["id"], item["wire"], item.get("typed", {}), item.get("show", [])],
    )
    page.evaluate("(w) => window.__masc.setWidgets(w)", widgets)
    queued = page.evaluate("async () => (await app.graphToPrompt()).output")
    result["queued"] = {node_id: entry["class_type"] for node_id, entry in queued.items()}
    ran = queue_and_wait(page)
    result["run"] = ran["outcome"]
    result["shown"] = page.evaluate(  # what each 'show <output>' Preview Any node received
        """(sent) => Object.fromEntries(window.__masc.nodes().filter(n => n.title.startsWith('show ')).map(n =>
            [n.title.slice(5), sent[String(n.id)] ?? null]))""",
        ran["sent"],
    )
    page.evaluate("() => window.__masc.fit({x: 60, y: 60, width: 1480, height: 880}, null, 0.3)")
    page.wait_for_timeout(800)
    page.screenshot(path=os.path.join(out, "blueprint-" + item["name"].replace(" ", "_") + ".png"))
    return result


def check_help(page, node_type: str, out: str) -> dict:
    """Select a node and press the selection toolbox's Node Info button: what the help panel shows."""
    page.evaluate(
        """(type) => { app.graph.clear(); window.__masc.resetView(); const n = LiteGraph.createNode(type); n.pos = [450, 320]; app.graph.add(n);
                       app.canvas.setDirty(true, true); app.canvas.draw(true, true); }""",
        node_type,
    )
    page.wait_for_timeout(500)
    title = page.evaluate(  # the node's title bar on screen: a user clicks it to select the node
        """() => { const r = app.canvas.canvas.getBoundingClientRect(), n = window.__masc.nodes()[0];
                   const [x, y] = app.canvas.ds.convertOffsetToCanvas([n.pos[0] + 60, n.pos[1] - LiteGraph.NODE_TITLE_HEIGHT / 2]);
                   return [r.x + x, r.y + y]; }"""
    )
    button = page.locator('[data-testid="info-button"]')
    for _ in range(3):  # the first click after a run may only take the focus back to the canvas
        page.keyboard.press("Escape")
        page.mouse.click(*title)
        try:
            button.first.wait_for(state="visible", timeout=5000)
            break
        except Exception:  # noqa: BLE001 - Playwright's TimeoutError: try the click again
            continue
    if button.count() == 0:
        return {"button": False}
    try:  # the toolbox sits above the node, clear of the page's floating panels
        button.first.click(timeout=10_000)
    except Exception as error:  # noqa: BLE001 - recorded for the test to show, the session goes on
        page.screenshot(path=os.path.join(out, f"help-{node_type}.png"))
        return {"button": True, "shown": None, "error": str(error).splitlines()[0]}
    page.wait_for_timeout(2500)
    shown = page.evaluate(
        """(title) => {
            const h1 = [...document.querySelectorAll('h1')].find(h => h.textContent.trim() === title);
            if (!h1) return null;
            let box = h1.parentElement;
            while (box && !box.querySelector('h2')) box = box.parentElement;
            return {h1: h1.textContent.trim(), h2: [...(box ?? h1).querySelectorAll('h2')].map(h => h.textContent.trim()),
                    text: (box ?? h1).innerText};
        }""",
        page.evaluate("(t) => LiteGraph.registered_node_types[t].title", node_type),
    )
    # The pictures the page shows (web/docs/images/): each must have loaded, at its own width.
    images = page.evaluate("""() => [...document.querySelectorAll('img')].filter(i => i.src.includes('/docs/images/'))
                                   .map(i => ({src: i.src, width: i.naturalWidth}))""")
    page.screenshot(path=os.path.join(out, f"help-{node_type}.png"))
    return {"button": True, "shown": shown, "images": images}


def _page_ready(page) -> None:
    page.wait_for_function(
        "() => window.app && window.app.graph && window.LiteGraph && window.app.canvas", timeout=120_000
    )


def _dialog_tiles(page) -> list[str]:
    page.wait_for_function(
        "() => [...document.querySelectorAll('.masc-pick img')].every(i => i.complete && i.naturalWidth > 0)",
        timeout=60_000,
    )
    return page.evaluate("() => [...document.querySelectorAll('.masc-pick [data-position]')].map(t => t.innerText)")


def check_pick_after_reload(page, item: dict, widgets: dict, out: str) -> dict:
    """Queue a graph with MaSC Pick, reload the tab while its dialog is open, pick in the dialog the reloaded page shows.

    The page's client id, the dialog's tiles before and after, and the prompt's id (the test reads its outcome from
    the server's history). Reloading loses the page's helpers: this runs last in a session.
    """
    import json

    with open(item["path"], encoding="utf-8") as handle:
        graph = json.load(handle)
    page.evaluate("async (g) => { await app.loadGraphData(g); }", graph)
    page.wait_for_timeout(1500)
    page.evaluate("(w) => window.__masc.setWidgets(w)", widgets)
    client_before = page.evaluate(
        """async () => {
            const { api } = await import('/scripts/api.js');
            api.addEventListener('execution_start', e => { window.__mascPromptId = e.detail.prompt_id; });
            app.queuePrompt(0, 1);
            return api.clientId;
        }"""
    )
    page.wait_for_selector(".masc-pick [data-position]", timeout=900_000)
    prompt_id = page.evaluate("() => window.__mascPromptId ?? null")
    tiles_before = _dialog_tiles(page)
    page.screenshot(path=os.path.join(out, "pick-before-reload.png"))
    page.reload(wait_until="load", timeout=120_000)
    _page_ready(page)
    page.wait_for_selector(".masc-pick [data-position]", timeout=120_000)  # shown again, without a new queue press
    tiles_after = _dialog_tiles(page)
    client_after = page.evaluate("async () => (await import('/scripts/api.js')).api.clientId")
    page.screenshot(path=os.path.join(out, "pick-after-reload.png"))
    for position in item["pick"]:
        page.click(f".masc-pick [data-position='{position}']")
    page.click(".masc-pick button[data-action='keep']")
    page.wait_for_selector(".masc-pick", state="detached", timeout=60_000)
    return {
        "client_before": client_before,
        "client_after": client_after,
        "prompt_id": prompt_id,
        "tiles_before": tiles_before,
        "tiles_after": tiles_after,
        "picked": item["pick"],
    }


def open_templates(page, pack: str, names: list[str], out: str) -> dict:
    """Open each template from the templates browser, as a person does: the view the front end chose for it, whether
    it draws nodes in full or as blank boxes (LiteGraph's low-quality mode, below ``min_font_size_for_lod`` over the
    node font size), the nodes that overlap, and a screenshot ``open-<name>.png`` for review."""
    opened = {}
    for name in names:
        dialog = page.locator("[role=dialog]")
        if not dialog.get_by_text(pack, exact=True).count():
            page.evaluate("async () => { await app.extensionManager.command.execute('Comfy.BrowseTemplates'); }")
            page.wait_for_timeout(2500)
        template = dialog.get_by_text(name, exact=True)
        if not template.count():
            dialog.get_by_text(pack, exact=True).first.dispatch_event("click")
            page.wait_for_timeout(2500)
        # A click event rather than a mouse click: front end 1.27 animates a card under the pointer and re-renders
        # the chosen category's cards, so Playwright never finds them "stable" to click.
        template.first.dispatch_event("click")
        page.wait_for_timeout(3500)
        page.keyboard.press("Escape")  # the missing-models toast of a DiT template, if any
        page.wait_for_timeout(500)
        view = page.evaluate(
            """() => ({scale: app.canvas.ds.scale, low_quality: !!app.canvas.low_quality,
                       threshold: app.canvas._lowQualityZoomThreshold ?? null,
                       nodes: window.__masc.nodes().length, subgraphs: window.__masc.nodes().filter(n => n.subgraph).length})"""
        )
        view["overlaps"] = page.evaluate("() => window.__masc.overlaps(false)")
        view["screenshot"] = os.path.join(out, f"open-{name}.png")
        page.screenshot(path=view["screenshot"])
        opened[name] = view
    return opened
