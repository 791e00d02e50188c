// Minimal .npy (format 1.0/2.0) reader and writer: C-order, little-endian, the dtypes the
// benchmark models use. Returns/accepts {dtype, shape, data} with data a TypedArray.
'use strict';
const fs = require('fs');

const DTYPES = {  // numpy descr -> [onnxruntime tensor type, TypedArray]
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
  '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
};

function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${path}: Fortran order is not supported`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const entry = DTYPES[descr];
  if (!entry) throw new Error(`${path}: dtype ${descr} is not supported`);
  const [dtype, Typed] = entry;
  const offset = start + headerLen;
  const count = shape.reduce((a, b) => a * b, 1);
  // Copy into an aligned buffer: the payload offset need not be a multiple of the element size.
  const bytes = new Uint8Array(count * Typed.BYTES_PER_ELEMENT);
  bytes.set(buf.subarray(offset, offset + bytes.length));
  return { dtype, shape, data: new Typed(bytes.buffer) };
}

function writeNpy(path, dtype, shape, data) {
  const descr = Object.keys(DTYPES).find(k => DTYPES[k][0] === dtype);
  if (!descr) throw new Error(`writeNpy: dtype ${dtype} is not supported`);
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);  // total header a multiple of 64 bytes
  header += ' '.repeat(pad % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const payload = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(path, Buffer.concat([pre, Buffer.from(header, 'latin1'), payload]));
}

module.exports = { readNpy, writeNpy };
