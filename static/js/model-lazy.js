// Cards below the fold, loaded when first needed (a dynamic import()), so the page's
// first paint evaluates only what it shows: lazy(load) stands for the card load()
// resolves to; each call waits for it, in order.

/** A stand-in for the card `load()` mounts: its methods are called once it is there. */
export function lazy(load) {
  let card = null;
  let loading = null;
  const get = () => loading || (loading = load().then((c) => (card = c)));
  return new Proxy(
    {},
    {
      get: (_, name) =>
        (...args) => {
          if (card) return card[name](...args);
          get().then((c) => c[name](...args));
          return undefined;
        },
    },
  );
}
