// One measurement in the page for bench_head_grid.py: build the grid, draw every
// thumbnail (first), draw them again in the log scale (redraw), hide half the layers
// and show them again (filter).  Evaluated by Playwright: one arrow function.
async ({ L, H, side, atlas }) => {
  const grids = await import('/static/js/model-grid.js');
  const overview = await import('/static/js/model-overview.js');
  const painted = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  document.querySelector('[data-testid=bench-card]')?.remove();
  const grid = document.createElement('div');
  grid.className = 'head-grid';
  const card = document.createElement('section');
  card.className = 'card grid-card';
  card.dataset.testid = 'bench-card';
  card.append(grid);
  document.querySelector('main').prepend(card);
  // Random causal rows, pooled: every cell a weight, the upper triangle masked.
  const T = side * 4;
  let seed = L * 7919 + H;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const maps = Array.from({ length: L * (H + 2) }, () => Float32Array.from({ length: side * side }, random));
  const options = (log) => ({ rows: side, cols: side, block: [4, 4], T, zmax: 1, log, causal: true });
  await painted();
  const times = {};
  let start = performance.now();
  const buttons = grids.buildHeadGrid(grid, L, H, () => {}, atlas);
  const list = [...buttons.values()];
  let thumbs = null;
  const draw = (log) => {
    if (atlas) {
      list.forEach((b, i) => thumbs.paint(b, maps[i], options(log)));
      thumbs.flush();
    } else list.forEach((b, i) => overview.drawCells(b.firstChild, maps[i], options(log)));
  };
  if (atlas) {
    thumbs = grids.thumbAtlas(grid, buttons);
    thumbs.layout();
  }
  draw(false);
  await painted();
  times.first = performance.now() - start;
  start = performance.now();
  draw(true);
  await painted();
  times.redraw = performance.now() - start;
  start = performance.now();
  for (const hide of [true, false]) {
    for (const cell of grid.querySelectorAll('[data-layer]')) {
      cell.hidden = hide && Number(cell.dataset.layer) % 2 === 0;
    }
    if (thumbs) thumbs.layout();
    await painted();
  }
  times.filter = performance.now() - start;
  times.canvases = grid.querySelectorAll('canvas').length;
  return times;
}
