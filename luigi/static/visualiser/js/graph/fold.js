// Folds a layered layout that is much wider than the window into rows, so that "Fit" keeps the boxes
// big enough to read: 93 leaves in one layer become a block of rows instead of a one-pixel ribbon.
// Each layer wider than a target width is packed into rows (in dagre's order, so neighbours stay
// near); the target is the width at which the whole graph takes the window's shape.
// A classic script for the layout worker (importScripts): it defines the global foldLayout.

/* exported foldLayout */

const FOLD_MARGIN = 20; // as the layout's marginx/marginy
const FOLD_NODE_GAP = 12; // between boxes in a row (a little less than the layout's nodesep: rows are dense by design)
const FOLD_ROW_GAP = 8; // between the rows of one folded layer
const FOLD_RANK_GAP = 40; // between layers (a little less than the layout's ranksep: rows already part them)
const FOLD_EDGE_BEND = 28;
const FOLD_SLACK = 1.1; // a layout at most this much wider than the window's shape is left alone
const FOLD_TRIES = 40; // widths tried each side of the one with the window's shape, up to ±50%

/**
 * layout: {width, height, positions: {id: [x, y]}, routes}; nodes: [{id, width, height}];
 * edges: [[from, to]]; viewport: {width, height} of the drawing area. Returns a layout of the same shape.
 */
function foldLayout(layout, nodes, edges, viewport) {
  if (!viewport || !(viewport.width > 0) || !(viewport.height > 0) || !nodes.length) return layout;
  const aspect = viewport.width / viewport.height;
  if (layout.width <= layout.height * aspect * FOLD_SLACK) return { ...layout, folded: false };
  const ranks = ranksOf(layout, nodes);
  const width = bestWidth(ranks, viewport, layout.width - 2 * FOLD_MARGIN);
  const positions = place(ranks, width, layout.width - 2 * FOLD_MARGIN);
  const sizes = new Map(nodes.map((n) => [n.id, n]));
  const routes = edges.map(([from, to]) => route(positions[from], sizes.get(from), positions[to], sizes.get(to)));
  return { width: width + 2 * FOLD_MARGIN, height: heightAt(ranks, width) + 2 * FOLD_MARGIN, positions, routes, folded: true };
}

/** Nodes grouped by layer (same y), top to bottom, each layer left to right. */
function ranksOf(layout, nodes) {
  const byY = new Map();
  for (const node of nodes) {
    const [x, y] = layout.positions[node.id];
    const key = Math.round(y);
    if (!byY.has(key)) byY.set(key, []);
    byY.get(key).push({ id: node.id, width: node.width, height: node.height, x: x - FOLD_MARGIN });
  }
  return [...byY.entries()].sort((a, b) => a[0] - b[0]).map(([, rank]) => rank.sort((a, b) => a.x - b.x));
}

/** Greedy rows of one layer at most `width` wide; `height` is the layer's total height. */
function rowsOf(rank, width) {
  const rows = [];
  let row = null;
  for (const item of rank) {
    if (!row || row.width + FOLD_NODE_GAP + item.width > width) {
      row = { items: [], width: -FOLD_NODE_GAP, height: 0 };
      rows.push(row);
    }
    row.items.push(item);
    row.width += FOLD_NODE_GAP + item.width;
    row.height = Math.max(row.height, item.height);
  }
  const height = rows.reduce((sum, r) => sum + r.height, 0) + FOLD_ROW_GAP * (rows.length - 1);
  return { rows, height };
}

/** The folded height of all layers at content width `width`. */
function heightAt(ranks, width) {
  return ranks.reduce((sum, rank) => sum + rowsOf(rank, width).height, 0) + FOLD_RANK_GAP * (ranks.length - 1);
}

/**
 * The content width whose folded layout "Fit" shows largest. Near the width at which the layout takes
 * the window's shape (found by bisection: height falls as width grows), rows fill in steps, so the
 * widths around it are tried too.
 */
function bestWidth(ranks, viewport, widest) {
  const aspect = viewport.width / viewport.height;
  const narrowest = Math.max(...ranks.flat().map((item) => item.width));
  let low = narrowest;
  let high = Math.max(low, widest);
  for (let i = 0; i < 30 && high - low > 1; i += 1) {
    const mid = (low + high) / 2;
    if ((mid + 2 * FOLD_MARGIN) / (heightAt(ranks, mid) + 2 * FOLD_MARGIN) < aspect) low = mid;
    else high = mid;
  }
  const scale = (w) => Math.min(viewport.width / (w + 2 * FOLD_MARGIN), viewport.height / (heightAt(ranks, w) + 2 * FOLD_MARGIN));
  let best = high;
  for (let step = -FOLD_TRIES; step <= FOLD_TRIES; step += 1) {
    const width = Math.min(widest, Math.max(narrowest, high * (1 + step / (2 * FOLD_TRIES))));
    if (scale(width) > scale(best)) best = width;
  }
  return Math.ceil(best);
}

/** Centres ({id: [x, y]}) for every node: folded layers in centred rows, the others squeezed in place. */
function place(ranks, width, widest) {
  const positions = {};
  const squeeze = width / widest;
  let top = FOLD_MARGIN;
  for (const rank of ranks) {
    const { rows, height } = rowsOf(rank, width);
    if (rows.length === 1) {
      placeRow(rank, rank.map((item) => item.x * squeeze), width, top + rows[0].height / 2, positions);
    } else {
      let y = top;
      for (const row of rows) {
        let left = (width - row.width) / 2;
        const centres = row.items.map((item) => {
          const centre = left + item.width / 2;
          left += item.width + FOLD_NODE_GAP;
          return centre;
        });
        placeRow(row.items, centres, width, y + row.height / 2, positions);
        y += row.height + FOLD_ROW_GAP;
      }
    }
    top += height + FOLD_RANK_GAP;
  }
  return positions;
}

/** Boxes as near their wanted centres as they can be without overlapping or leaving [0, width]. */
function placeRow(items, wanted, width, y, positions) {
  const lefts = [];
  let right = -Infinity;
  items.forEach((item, i) => {
    lefts[i] = Math.max(wanted[i] - item.width / 2, right + FOLD_NODE_GAP, 0);
    right = lefts[i] + item.width;
  });
  let limit = width;
  for (let i = items.length - 1; i >= 0; i -= 1) {
    lefts[i] = Math.min(lefts[i], limit - items[i].width);
    limit = lefts[i] - FOLD_NODE_GAP;
  }
  items.forEach((item, i) => {
    positions[item.id] = [FOLD_MARGIN + lefts[i] + item.width / 2, y];
  });
}

/** A smooth line from the bottom of a dependency's box down to the top of its dependent's. */
function route(from, fromSize, to, toSize) {
  if (!from || !to) return [];
  const start = [from[0], from[1] + fromSize.height / 2];
  const end = [to[0], to[1] - toSize.height / 2];
  const bend = Math.max(4, Math.min(FOLD_EDGE_BEND, (end[1] - start[1]) / 3));
  return [start, [start[0], start[1] + bend], [end[0], end[1] - bend], end];
}
