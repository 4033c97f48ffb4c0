// Lays out a graph with dagre off the page's main thread, so a large graph never freezes the tab.
// A classic worker (importScripts), because dagre ships as a browser script defining `dagre`.
//
// A layout much wider than the window is then folded into rows (fold.js), so "Fit" stays readable.
//
// In:  {id, nodes: [{id, width, height}], edges: [[from, to], ...], rankdir, viewport: {width, height}}
// Out: {id, ok: true, width, height, positions: {nodeId: [x, y]}, routes: [[[x, y], ...] per edge],
//       folded, ms} or {id, ok: false, error}

/* global dagre, foldLayout */
importScripts('../../lib/dagre.min.js');
importScripts('./fold.js');

// Network simplex gives the tidiest ranks but grows steeply; longest-path stays fast on big graphs.
const NETWORK_SIMPLEX_LIMIT = 300;

self.onmessage = (event) => {
  const request = event.data;
  try {
    self.postMessage({ id: request.id, ok: true, ...layout(request) });
  } catch (error) {
    self.postMessage({ id: request.id, ok: false, error: String(error && error.message ? error.message : error) });
  }
};

function layout({ nodes, edges, rankdir = 'TB', viewport = null }) {
  const started = performance.now();
  const laidOut = foldLayout(layered(nodes, edges, rankdir), nodes, edges, viewport);
  return { ...laidOut, ms: Math.round(performance.now() - started) };
}

function layered(nodes, edges, rankdir) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({
    rankdir,
    nodesep: 18,
    ranksep: 46,
    edgesep: 8,
    marginx: 20,
    marginy: 20,
    ranker: nodes.length > NETWORK_SIMPLEX_LIMIT ? 'longest-path' : 'network-simplex',
  });
  g.setDefaultEdgeLabel(() => ({}));
  for (const node of nodes) g.setNode(node.id, { width: node.width, height: node.height });
  for (const [from, to] of edges) g.setEdge(from, to);
  dagre.layout(g);
  const positions = {};
  for (const node of nodes) {
    const placed = g.node(node.id);
    positions[node.id] = [placed.x, placed.y];
  }
  const routes = edges.map(([from, to]) => {
    const edge = g.edge(from, to);
    return edge && edge.points ? edge.points.map((p) => [p.x, p.y]) : [];
  });
  const size = g.graph();
  return { width: size.width || 0, height: size.height || 0, positions, routes };
}
