// Frame encoding, signing, decoding and verification (docs/PROTOCOL.md §2).
//   frame = body ‖ crc32(body) as 4 bytes big-endian ‖ Ed25519 signature over body (64 bytes)
// body is the canonical msgpack of FrameBody: arrays in a fixed field order, no maps, no
// records, so equal content gives equal bytes on every replica. decodeFrame is total.
import { Packr, Unpackr } from 'msgpackr';
import { MAX_FRAME_BYTES, MIN_FRAME_BYTES, SIGNATURE_BYTES, WIRE_VERSION } from '../constants.ts';
import type { ProcessId, Signer, Verifier } from '../ports.ts';
import { err, ok, type Result } from '../result.ts';
import { crc32 } from './crc32.ts';
import {
  frameBody, groupMsgCG, type Frame, type GroupMsgCG, type Item, type ItemWire, type PtpPayload,
  type PtpPayloadWire, type SignedCG,
} from './messages.ts';

const packr = new Packr({ useRecords: false, variableMapSize: true, encodeUndefinedAsNil: true });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: false, int64AsType: 'number' });

/** Canonical bytes of a schema tree. */
export function pack(tree: unknown): Uint8Array {
  return packr.pack(tree);
}

/** Parse untrusted msgpack bytes; never throws. */
export function unpack(data: Uint8Array): Result<unknown> {
  try {
    return ok(unpackr.unpack(data));
  } catch (e) {
    return err('WIRE_MALFORMED', `msgpack: ${(e as Error).message}`.slice(0, 200));
  }
}

export type EncodeContext = { cluster: string; signer: Signer };
export type DecodeContext = { cluster: string; self: ProcessId; verifier: Verifier };

/** Sign a CG as its agent: a replica can relay it but never forge it (spec §1.3). */
export function signCG(cg: GroupMsgCG, signer: Signer): SignedCG {
  const bytes = pack(groupMsgCG.enc(cg));
  return { bytes, sig: signer.sign(bytes), cg };
}

/** Decode and verify a CG relayed or sent by anyone: the signature must be its client's. */
export function openCG(bytes: Uint8Array, sig: Uint8Array, verifier: Verifier): Result<SignedCG> {
  const tree = unpack(bytes);
  if (!tree.ok) return tree;
  const cg = groupMsgCG.dec(tree.value, 'cg');
  if (!cg.ok) return cg;
  if (!verifier.has(cg.value.client)) return err('SIG_UNKNOWN_KEY', `cg from unknown client ${cg.value.client}`);
  if (!verifier.verify(cg.value.client, bytes, sig)) return err('SIG_INVALID', `cg signature of ${cg.value.client}`);
  return ok({ bytes, sig, cg: cg.value });
}

function ptpToWire(p: PtpPayload): PtpPayloadWire {
  return p.type === 'wrapper' ? { type: 'wrapper', rsn: p.rsn, cgBytes: p.signed.bytes, cgSig: p.signed.sig } : p;
}

function itemToWire(item: Item): ItemWire {
  switch (item.type) {
    case 'grp':
      return item.body.type === 'cg'
        ? { ...item, body: { type: 'cg', bytes: item.body.signed.bytes, sig: item.body.signed.sig } }
        : { ...item, body: item.body };
    case 'ptp':
      return { ...item, body: item.body === null ? null : ptpToWire(item.body) };
    default:
      return item;
  }
}

function itemFromWire(item: ItemWire, from: ProcessId, verifier: Verifier): Result<Item> {
  switch (item.type) {
    case 'grp': {
      if (item.body.type === 'gc') return ok({ ...item, body: item.body });
      const signed = openCG(item.body.bytes, item.body.sig, verifier);
      if (!signed.ok) return signed;
      // An agent sends only its own CGs on lane 1; relays travel wrapped on lane 0.
      if (signed.value.cg.client !== from) return err('SIG_INVALID', `cg of ${signed.value.cg.client} sent by ${from}`);
      return ok({ ...item, body: { type: 'cg', signed: signed.value } });
    }
    case 'ptp': {
      const body = item.body;
      if (body === null || body.type !== 'wrapper') return ok({ ...item, body });
      const signed = openCG(body.cgBytes, body.cgSig, verifier);
      if (!signed.ok) return signed;
      return ok({ ...item, body: { type: 'wrapper', rsn: body.rsn, signed: signed.value } });
    }
    default:
      return ok(item);
  }
}

export function encodeFrame(frame: Frame, ctx: EncodeContext): Uint8Array {
  const body = pack(frameBody.enc({
    version: WIRE_VERSION, cluster: ctx.cluster, from: ctx.signer.id, to: frame.to, items: frame.items.map(itemToWire),
  }));
  const sig = ctx.signer.sign(body);
  const out = new Uint8Array(body.length + 4 + SIGNATURE_BYTES);
  out.set(body, 0);
  new DataView(out.buffer).setUint32(body.length, crc32(body), false);
  out.set(sig, body.length + 4);
  return out;
}

/** Decode, check and verify one frame. Every failure is a typed drop reason (STYLE.md 5). */
export function decodeFrame(data: Uint8Array, ctx: DecodeContext): Result<Frame> {
  if (!(data instanceof Uint8Array)) return err('WIRE_MALFORMED', 'not bytes');
  if (data.length < MIN_FRAME_BYTES) return err('WIRE_TOO_SHORT', `${data.length} bytes`);
  if (data.length > MAX_FRAME_BYTES) return err('WIRE_TOO_LARGE', `${data.length} bytes > ${MAX_FRAME_BYTES}`);
  const bodyEnd = data.length - 4 - SIGNATURE_BYTES;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (view.getUint32(bodyEnd, false) !== crc32(data, bodyEnd)) return err('WIRE_CHECKSUM', 'crc32 mismatch');
  const bodyBytes = data.subarray(0, bodyEnd);
  const tree = unpack(bodyBytes);
  if (!tree.ok) return tree;
  // The version is checked before the full schema so a future format is told apart from garbage.
  if (Array.isArray(tree.value) && typeof tree.value[0] === 'number' && tree.value[0] !== WIRE_VERSION) {
    return err('WIRE_VERSION', `version ${tree.value[0]}`);
  }
  const body = frameBody.dec(tree.value, 'frame');
  if (!body.ok) return body;
  const b = body.value;
  if (b.cluster !== ctx.cluster) return err('WIRE_FOREIGN_CLUSTER', `cluster ${b.cluster}`);
  if (b.to !== ctx.self) return err('WIRE_MISADDRESSED', `frame for ${b.to}`);
  if (!ctx.verifier.has(b.from)) return err('SIG_UNKNOWN_KEY', `sender ${b.from}`);
  if (!ctx.verifier.verify(b.from, bodyBytes, data.subarray(bodyEnd + 4))) return err('SIG_INVALID', `frame of ${b.from}`);
  const items: Item[] = [];
  for (const w of b.items) {
    const r = itemFromWire(w, b.from, ctx.verifier);
    if (!r.ok) return r;
    items.push(r.value);
  }
  return ok({ from: b.from, to: b.to, items });
}

/** Peek at the claimed sender of a frame without verifying it (transport routing only). */
export function peekSender(data: Uint8Array): ProcessId | null {
  if (data.length < MIN_FRAME_BYTES || data.length > MAX_FRAME_BYTES) return null;
  const tree = unpack(data.subarray(0, data.length - 4 - SIGNATURE_BYTES));
  if (!tree.ok || !Array.isArray(tree.value)) return null;
  const from = tree.value[2];
  return typeof from === 'string' && from.length <= 32 ? from : null;
}
