// Small DOM helpers. Text always goes in through textContent, never innerHTML.

export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of [].concat(children)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function byTestId(id, root = document) {
  return root.querySelector(`[data-testid="${id}"]`);
}

/** The JSON block the server rendered into the page. */
export function initialData() {
  const block = document.getElementById("initial-data");
  return block ? JSON.parse(block.textContent) : {};
}

export function fillDatalist(datalist, words) {
  datalist.replaceChildren(...words.map((w) => el("option", { value: w })));
}

/** Offer a JSON file for download (a same-origin blob: URL). */
export function downloadJson(filename, payload) {
  const blob = new Blob([JSON.stringify(payload, null, 2)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const link = el("a", { href: url, download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

export function fmt(value, digits = 3) {
  return value === null || value === undefined ? "−∞" : Number(value).toFixed(digits);
}

/** Copy the page's address to the clipboard, and say so (or where the link is) with say(text). */
export async function copyPageLink(say) {
  try {
    await navigator.clipboard.writeText(window.location.href);
    say("Link copied.");
  } catch {
    say("The link is in the address bar.");
  }
}
