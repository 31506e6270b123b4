// NumPy's .npz written in the browser: a zip (stored, no compression) of .npy files,
// each a little-endian float32 array or a fixed-width unicode array ('<U n'), so that
// `numpy.load(path)` reads the maps a page shows.

const encoder = new TextEncoder();

/** One .npy file: the version 1.0 header (padded to 64 bytes) and the data. */
function npy(descr, shape, data) {
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(", ");
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  const unpadded = 10 + header.length + 1;
  header += " ".repeat((64 - (unpadded % 64)) % 64) + "\n";
  const head = new Uint8Array(10 + header.length);
  head.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]); // \x93NUMPY, version 1.0
  new DataView(head.buffer).setUint16(8, header.length, true);
  head.set(encoder.encode(header), 10);
  const out = new Uint8Array(head.length + data.byteLength);
  out.set(head);
  out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), head.length);
  return out;
}

/** A float32 array of nested lists (a rectangular array, null read as NaN). */
export function float32Array(nested) {
  const shape = [];
  for (let a = nested; Array.isArray(a); a = a[0]) shape.push(a.length);
  const flat = new Float32Array(shape.reduce((n, d) => n * d, 1));
  let k = 0;
  const walk = (a) => {
    if (Array.isArray(a)) for (const b of a) walk(b);
    else flat[k++] = a === null ? Number.NaN : a;
  };
  walk(nested);
  return { descr: "<f4", shape, data: flat };
}

/** Strings as numpy's '<U n' (UTF-32 little-endian, n code points each). */
export function unicodeArray(strings) {
  const chars = strings.map((s) => Array.from(s, (c) => c.codePointAt(0)));
  const n = Math.max(1, ...chars.map((c) => c.length));
  const data = new Uint32Array(strings.length * n);
  chars.forEach((c, i) => data.set(c, i * n));
  return { descr: `<U${n}`, shape: [strings.length], data };
}

const CRC = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[i] = c >>> 0;
  }
  return table;
})();

function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A zip of `files` (name -> bytes), stored: local headers, data, central directory. */
function zip(files) {
  const parts = [];
  const central = [];
  let offset = 0;
  for (const [name, bytes] of Object.entries(files)) {
    const nameBytes = encoder.encode(name);
    const crc = crc32(bytes);
    const local = new DataView(new ArrayBuffer(30));
    [[0, 0x04034b50, 4], [4, 20, 2], [8, 0, 2], [14, crc, 4], [18, bytes.length, 4], [22, bytes.length, 4], [26, nameBytes.length, 2]].forEach(
      ([at, v, size]) => (size === 4 ? local.setUint32(at, v, true) : local.setUint16(at, v, true)),
    );
    const entry = new DataView(new ArrayBuffer(46));
    [[0, 0x02014b50, 4], [4, 20, 2], [6, 20, 2], [16, crc, 4], [20, bytes.length, 4], [24, bytes.length, 4], [28, nameBytes.length, 2], [42, offset, 4]].forEach(
      ([at, v, size]) => (size === 4 ? entry.setUint32(at, v, true) : entry.setUint16(at, v, true)),
    );
    parts.push(new Uint8Array(local.buffer), nameBytes, bytes);
    central.push(new Uint8Array(entry.buffer), nameBytes);
    offset += 30 + nameBytes.length + bytes.length;
  }
  const size = central.reduce((n, b) => n + b.length, 0);
  const end = new DataView(new ArrayBuffer(22));
  const count = Object.keys(files).length;
  [[0, 0x06054b50, 4], [8, count, 2], [10, count, 2], [12, size, 4], [16, offset, 4]].forEach(
    ([at, v, s]) => (s === 4 ? end.setUint32(at, v, true) : end.setUint16(at, v, true)),
  );
  return new Blob([...parts, ...central, new Uint8Array(end.buffer)], { type: "application/zip" });
}

/** An .npz Blob of `arrays` (name -> {descr, shape, data}). */
export function npz(arrays) {
  return zip(Object.fromEntries(Object.entries(arrays).map(([name, a]) => [`${name}.npy`, npy(a.descr, a.shape, a.data)])));
}
