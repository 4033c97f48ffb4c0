"""The visualiser's graph view in a real headless Chromium against a real ``luigid``, at real sizes.

The luigid holds three graphs, registered through the RPC API as a worker would:

- ``MonthlyWarehouseReport`` (257 tasks): 93 ``Extract`` leaves in one layer, 93 loads, 62 cleans with
  a long family name, 8 weekly merges; three loads and one extract failed.
- ``Archive`` (401 tasks): 380 shards, 20 packs, past the size at which the graph opens grouped by family.
- ``Bulk`` (1,981 tasks): 1,940 items under 40 batches, near the most the page draws task by task.

The page is 1280x800, and what is measured is what a user sees: the boxes' size on the screen, which
ones are inside the window, the titles' drawn width against their boxes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from helpers.browser import checked_page, open_view
from helpers.luigid import HttpProbe, LuigidProcess, running_luigid

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest_plugins = ["helpers.browser"]  # its fixture chromium

VIEWPORT = {"width": 1280, "height": 800}
# Set to a folder to keep the screenshots for the documentation (doc/images/).
SCREENSHOT_ENV = "LUIGI_GRAPH_SCREENSHOTS"
WORKER = "graph-test"

SOURCES = ("orders", "payments", "clicks")
DAYS = [f"2024-05-{d:02d}" for d in range(1, 32)]
FAILED_LOADS = {("orders", "2024-05-03"), ("orders", "2024-05-04"), ("payments", "2024-05-17")}
FAILED_EXTRACT = ("clicks", "2024-05-28")
CLEAN = "DeduplicateWarehouseShipmentsAcrossRegions"  # a title longer than a box may be


def add(probe: HttpProbe, task_id: str, family: str, params: dict[str, str], **fields: Any) -> None:
    reply = probe.call(
        "add_task", {"worker": WORKER, "task_id": task_id, "family": family, "params": params, **fields}
    )
    assert reply.status == 200, reply.body


def register_report(probe: HttpProbe) -> None:
    """The 257-task month: Extract -> Load -> Clean -> Merge -> MonthlyWarehouseReport."""
    for source in SOURCES:
        for day in DAYS:
            params = {"source": source, "day": day}
            failed = (source, day) == FAILED_EXTRACT
            add(probe, f"Extract_{source}_{day}", "Extract", params, status="FAILED" if failed else "DONE")
            failed = (source, day) in FAILED_LOADS
            add(
                probe,
                f"Load_{source}_{day}",
                "Load",
                params,
                deps=[f"Extract_{source}_{day}"],
                status="FAILED" if failed else "PENDING",
            )
    cleans = []
    for day in DAYS:
        for half, sources in (("a", SOURCES[:2]), ("b", SOURCES[1:])):
            task_id = f"{CLEAN}_{day}_{half}"
            add(probe, task_id, CLEAN, {"day": day, "half": half}, deps=[f"Load_{s}_{day}" for s in sources])
            cleans.append(task_id)
    merges = []
    for week in range(8):
        task_id = f"Merge_{week}"
        add(probe, task_id, "Merge", {"week": str(week)}, deps=cleans[week * 8 : week * 8 + 8])
        merges.append(task_id)
    add(probe, "MonthlyWarehouseReport", "MonthlyWarehouseReport", {"month": "2024-05"}, deps=merges)


def register_archive(probe: HttpProbe) -> None:
    """401 tasks: Archive <- 20 Pack <- 380 Shard, two shards failed."""
    packs = []
    for p in range(20):
        shards = []
        for s in range(19):
            task_id = f"Shard_{p}_{s}"
            add(
                probe,
                task_id,
                "Shard",
                {"pack": str(p), "n": str(s)},
                status="FAILED" if (p, s) in ((3, 4), (11, 0)) else "DONE",
            )
            shards.append(task_id)
        add(probe, f"Pack_{p}", "Pack", {"pack": str(p)}, deps=shards)
        packs.append(f"Pack_{p}")
    add(probe, "Archive", "Archive", {}, deps=packs)


def register_bulk(probe: HttpProbe) -> None:
    """1,981 tasks: Bulk <- 40 Batch <- 1,940 Item (49 each), one item failed."""
    batches = []
    for b in range(40):
        items = [f"Item_{b}_{i}" for i in range(49) if b * 49 + i < 1940]
        for item in items:
            add(
                probe,
                item,
                "Item",
                {"batch": str(b), "i": item.rsplit("_", 1)[1]},
                status="FAILED" if item == "Item_27_13" else "PENDING",
            )
        add(probe, f"Batch_{b}", "Batch", {"batch": str(b)}, deps=items)
        batches.append(f"Batch_{b}")
    add(probe, "Bulk", "Bulk", {}, deps=batches)


@pytest.fixture(scope="module")
def luigid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LuigidProcess]:
    config = "[scheduler]\nretry_delay = 3600\nworker_disconnect_delay = 3600\n"
    with running_luigid(tmp_path_factory.mktemp("graph"), config=config) as started:
        probe = started.probe()
        register_report(probe)
        register_archive(probe)
        register_bulk(probe)
        yield started


@pytest.fixture(scope="module")
def base_url(luigid: LuigidProcess) -> str:
    return luigid.url.rstrip("/")


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    with checked_page(chromium, viewport=VIEWPORT) as opened:
        yield opened


def open_graph(page: Any, base_url: str, root: str, extra: str = "") -> None:
    open_view(page, base_url, f"#tab=graph&taskId={quote(root)}&hideDone=0&invert=0{extra}")
    page.wait_for_selector(".graph-view[data-state=ready]")


def keep_screenshot(page: Any, name: str) -> None:
    folder = os.environ.get(SCREENSHOT_ENV)
    if folder:
        page.screenshot(path=str(Path(folder) / name))


# What "readable" means here: at the scale "Fit" gives in a 1280x800 window, every box is at least
# MIN_BOX_PX high on the screen and the names drawn in it are at least MIN_TEXT_PX high.
MIN_BOX_PX = 16
MIN_TEXT_PX = 8.5

BOXES = """() => [...document.querySelectorAll('.graph-svg .node')].map((node) => {
  const box = node.querySelector('.node-box').getBoundingClientRect();
  const shown = [...node.querySelectorAll('text')].filter((t) => getComputedStyle(t).display !== 'none');
  return {
    id: node.dataset.id, status: node.dataset.status, family: node.dataset.family ?? null,
    halo: node.querySelector('.node-halo') !== null,
    box: [box.left, box.top, box.right, box.bottom],
    texts: shown.map((t) => {
      const r = t.getBoundingClientRect();
      return { kind: t.getAttribute('class'), text: t.textContent, left: r.left, right: r.right,
               px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a };
    }),
    tooltip: node.querySelector('title').textContent,
  };
})"""


def boxes(page: Any) -> list[dict[str, Any]]:
    """Every drawn box as the user sees it: its place on the screen and the text shown in it."""
    return page.evaluate(BOXES)


def stage(page: Any) -> tuple[float, float, float, float]:
    rect = page.evaluate(
        "() => { const r = document.querySelector('.graph-svg').getBoundingClientRect();"
        " return [r.left, r.top, r.right, r.bottom]; }"
    )
    return tuple(rect)


def inside(box: list[float], area: tuple[float, float, float, float]) -> bool:
    return box[0] >= area[0] - 1 and box[1] >= area[1] - 1 and box[2] <= area[2] + 1 and box[3] <= area[3] + 1


def height(box: list[float]) -> float:
    return box[3] - box[1]


def texts_fit(drawn: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(id, text) of every shown text that runs past the right edge of its box."""
    return [(b["id"], t["text"]) for b in drawn for t in b["texts"] if t["right"] > b["box"][2] + 0.5]


def test_a_wide_graph_opens_fitted_with_every_box_readable_and_every_failure_in_view(page, base_url):
    open_graph(page, base_url, "MonthlyWarehouseReport")
    drawn = boxes(page)
    assert len(drawn) == 257
    area = stage(page)
    assert all(inside(b["box"], area) for b in drawn)  # the first view is the whole graph
    assert min(height(b["box"]) for b in drawn) >= MIN_BOX_PX
    labels = [t for b in drawn for t in b["texts"]]
    assert len(labels) == 257 and all(t["kind"] == "node-label" for t in labels)  # the names, large
    assert min(t["px"] for t in labels) >= MIN_TEXT_PX
    failed = {b["id"] for b in drawn if b["status"] == "FAILED"}
    assert failed == {f"Load_{s}_{d}" for s, d in FAILED_LOADS} | {"Extract_{}_{}".format(*FAILED_EXTRACT)}
    assert {b["id"] for b in drawn if b["halo"]} == failed
    keep_screenshot(page, "visualiser-graph-wide.png")


def test_fit_after_zooming_gives_the_same_readable_view(page, base_url):
    open_graph(page, base_url, "MonthlyWarehouseReport")
    first = boxes(page)
    page.locator("button", has_text="+").click()
    page.locator("button", has_text="Fit").click()
    fitted = boxes(page)
    assert [b["box"] for b in fitted] == [b["box"] for b in first]
    assert min(height(b["box"]) for b in fitted) >= MIN_BOX_PX


def test_next_failure_steps_through_each_failed_task_at_reading_size(page, base_url):
    open_graph(page, base_url, "MonthlyWarehouseReport")
    centred = []
    for _ in range(5):
        page.locator("button", has_text="Next failure").click()
        page.wait_for_function("() => !document.querySelector('.graph-svg').classList.contains('compact')")
        area = stage(page)
        middle = ((area[0] + area[2]) / 2, (area[1] + area[3]) / 2)
        [at_centre] = [b for b in boxes(page) if inside([*middle, *middle], tuple(b["box"]))]
        assert at_centre["status"] == "FAILED"
        assert height(at_centre["box"]) >= 30
        assert {t["kind"] for t in at_centre["texts"]} == {"node-title", "node-subtitle"}
        centred.append(at_centre["id"])
    assert len(set(centred[:4])) == 4 and centred[4] == centred[0]  # all four, then round again
    keep_screenshot(page, "visualiser-graph-failure.png")


def test_every_name_fits_its_box_and_a_cut_name_is_whole_in_the_tooltip(page, base_url):
    open_graph(page, base_url, "MonthlyWarehouseReport")
    assert texts_fit(boxes(page)) == []  # the large names at "Fit"
    for _ in range(2):  # to the middle of the graph, near enough to read the parameters
        page.locator("button", has_text="+").click()
    page.wait_for_function("() => !document.querySelector('.graph-svg').classList.contains('compact')")
    area = stage(page)
    seen = [b for b in boxes(page) if inside(b["box"], area)]
    assert texts_fit(seen) == []  # titles and parameters at reading size
    cleans = [b for b in seen if b["id"].startswith(CLEAN)]
    assert cleans, "a clean task is in view"
    for clean in cleans:
        title = next(t["text"] for t in clean["texts"] if t["kind"] == "node-title")
        assert title.endswith("…") and CLEAN.startswith(title[:-1])
        assert clean["tooltip"].startswith(f"{CLEAN}(day=")


def test_a_graph_past_300_tasks_opens_grouped_by_family_with_counts_by_status(page, base_url):
    open_graph(page, base_url, "Archive")
    drawn = {b["family"]: b for b in boxes(page)}
    assert set(drawn) == {"Archive", "Pack", "Shard"}
    assert page.is_checked("#group-families")
    shard = page.locator('.graph-svg .node[data-family="Shard"] .node-subtitle').text_content()
    assert shard == "380 tasks: 2 failed, 378 done"
    assert drawn["Shard"]["halo"] and not drawn["Pack"]["halo"]
    assert "401 tasks" in page.locator(".graph-message").inner_text()
    assert page.locator(".graph-svg .edge").count() == 2
    keep_screenshot(page, "visualiser-graph-grouped.png")


def test_clicking_a_family_shows_its_tasks_and_its_chip_groups_them_again(page, base_url):
    open_graph(page, base_url, "Archive")
    page.locator('.graph-svg .node[data-family="Pack"]').click()
    page.wait_for_url("**expand=Pack**")
    page.wait_for_function("() => document.querySelectorAll('.graph-svg .node-task').length == 20")
    assert sorted(b["family"] for b in boxes(page) if b["family"] is not None) == ["Archive", "Shard"]
    assert page.locator(".graph-svg .edge").count() == 40  # Shard -> each pack -> Archive
    page.locator(".graph-message button.chip", has_text="Pack").click()
    page.wait_for_function("() => document.querySelectorAll('.graph-svg .node-family').length == 3")
    assert "expand=" not in page.evaluate("() => location.hash")


def test_unticking_group_by_family_draws_every_task(page, base_url):
    open_graph(page, base_url, "Archive")
    page.uncheck("#group-families")
    page.wait_for_url("**group=0**")
    page.wait_for_function("() => document.querySelectorAll('.graph-svg .node-task').length == 401")
    assert not page.is_checked("#group-families")


def test_a_graph_of_2000_tasks_drawn_one_by_one_opens_on_its_failure_at_reading_size(page, base_url):
    open_graph(page, base_url, "Bulk", "&group=0")
    assert page.locator(".graph-svg .node").count() == 1981
    failed = page.locator('.graph-svg .node[data-id="Item_27_13"] .node-box').bounding_box()
    area = stage(page)
    assert inside(
        [failed["x"], failed["y"], failed["x"] + failed["width"], failed["y"] + failed["height"]], area
    )
    assert failed["height"] >= 30


def test_a_status_change_shows_in_the_open_grouped_graph_without_reloading(page, luigid, base_url):
    probe = luigid.probe()
    parts = [f"LivePart_{i}" for i in range(5)]
    for i, part in enumerate(parts):
        add(probe, part, "LivePart", {"i": str(i)}, status="FAILED" if i == 2 else "PENDING")
    add(probe, "LiveRoot", "LiveRoot", {}, deps=parts)
    open_graph(page, base_url, "LiveRoot", "&group=1")
    subtitle = page.locator('.graph-svg .node[data-family="LivePart"] .node-subtitle')
    assert subtitle.text_content() == "5 tasks: 1 failed, 4 pending"
    page.evaluate("() => { window.notReloaded = true; }")
    add(probe, "LivePart_2", "LivePart", {"i": "2"}, status="DONE")
    page.wait_for_function(
        "() => document.querySelector('.graph-svg .node[data-family=LivePart] .node-subtitle')"
        ".textContent == '5 tasks: 4 pending, 1 done'"
    )
    assert page.locator('.graph-svg .node[data-family="LivePart"] .node-halo').count() == 0
    assert page.evaluate("() => window.notReloaded") is True
