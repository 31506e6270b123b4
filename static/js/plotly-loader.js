// Plotly.js, loaded only when a reader reaches for a plot (hover, touch, focus):
// parsing even the partial bundle is the largest task of a page, so the first
// paint never waits for it (quick-heatmap.js and quick-chart.js draw the same
// figures without it). The URL is versioned (base.html: data-plotly-src).

let loading = null;

/** window.Plotly, adding the script the first time it is asked for. */
export function plotlyReady() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (loading) return loading;
  // A page without a Plotly.js URL (a notebook view: nothing is fetched) keeps its quick figures.
  if (!document.body.dataset.plotlySrc) return Promise.reject(new Error("no Plotly.js on this page"));
  loading = new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.id = "plotly-js";
    script.src = document.body.dataset.plotlySrc;
    script.addEventListener(
      "load",
      () => {
        performance.mark("plotly-ready");
        resolve(window.Plotly);
      },
      { once: true },
    );
    script.addEventListener(
      "error",
      () => {
        script.remove();
        loading = null; // the next reach for a plot retries
        reject(new Error("Plotly.js did not load"));
      },
      { once: true },
    );
    document.head.append(script);
  });
  return loading;
}

/** Let the browser paint and handle input between two pieces of work. */
export function yieldToMain() {
  if (globalThis.scheduler && typeof globalThis.scheduler.yield === "function") return globalThis.scheduler.yield();
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}
