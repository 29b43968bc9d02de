// Frame encoding, signing, decoding and verification (docs/PROTOCOL.md §2).
//   frame  = header ‖ body ‖ crc32(header ‖ body) (4 bytes, big-endian) ‖ authenticator
//   header = version (1 byte) ‖ length of the sender id (1 byte) ‖ sender id (ASCII)
//   body   = canonical msgpack [cluster, to, items]
// The authenticator is an Ed25519 signature (64 bytes, version 1) or, on a link both ends hold
// a key for, an HMAC-SHA256 tag (32 bytes, version 2, §2.4) unless the frame carries an order a
// backup may forward as evidence. It covers header ‖ body and is checked BEFORE the body is
// parsed: an unauthenticated peer cannot make a receiver spend more than a CRC and one check.
// Bodies are parsed by a strict decoder and must re-encode to the very same bytes, so every
// replica accepts exactly the same frames (canonical input, not only canonical output).
// decodeFrame is total.
import { Packr } from 'msgpackr';
import { bytesEqual } from '../../base/bytes.ts';
import {
  MAC_BYTES, MAX_FRAME_BYTES, MAX_ID_CHARS, MAX_SIGNED_ITEMS_PER_FRAME, MIN_FRAME_BYTES, MIN_MAC_FRAME_BYTES, SIGNATURE_BYTES,
  WIRE_VERSION, WIRE_VERSION_MAC,
} from '../constants.ts';
import type { LinkAuth, ProcessId, Signer, Verifier } from '../ports.ts';
import { assert, err, ok, type Result } from '../../base/result.ts';
import { crc32 } from './crc32.ts';
import {
  accusation as accusationSchema, embeddedSignatures, frameBody, groupMsgCG, needsFrameSignature, PROCESS_ID_PATTERN, type Accusation, type Frame,
  type GroupMsgCG, type Item, type ItemWire, type PtpPayload, type PtpPayloadWire, type SignedAccusation, type SignedCG,
} from './messages.ts';
import { decodeStrict } from './msgpack-strict.ts';

const packr = new Packr({ useRecords: false, variableMapSize: true, encodeUndefinedAsNil: true });

/** Canonical bytes of a schema tree. */
export function pack(tree: unknown): Uint8Array {
  return packr.pack(tree);
}

/** Parse untrusted msgpack bytes strictly and insist they are the canonical encoding of what
 *  they hold; never throws. */
export function unpack(data: Uint8Array): Result<unknown> {
  const tree = decodeStrict(data);
  if (!tree.ok) return tree;
  if (!bytesEqual(pack(tree.value), data)) return err('WIRE_MALFORMED', 'msgpack: not the canonical encoding');
  return tree;
}

/** `linkAuth`: this process's link keys (PROTOCOL §2.4). Without it every frame is signed; with
 *  it, a frame to a peer it has a key for is MAC'd unless an item needs the signature. */
export type EncodeContext = { cluster: string; signer: Signer; linkAuth?: LinkAuth };
/** `linkAuth`: without it a MAC'd frame is refused as from an unknown key. */
export type DecodeContext = { cluster: string; self: ProcessId; verifier: Verifier; linkAuth?: LinkAuth };

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

/** Sign an accusation as its replica (PROTOCOL §10.3). */
export function signAccusation(a: Accusation, signer: Signer): SignedAccusation {
  const bytes = pack(accusationSchema.enc(a));
  return { bytes, sig: signer.sign(bytes), accusation: a };
}

/** Check a decoded accusation: canonical bytes, signed by the replica it names as accuser. */
export function verifyAccusation(s: SignedAccusation, verifier: Verifier): Result<SignedAccusation> {
  if (!bytesEqual(pack(accusationSchema.enc(s.accusation)), s.bytes)) return err('WIRE_MALFORMED', 'accusation: not canonical');
  const from = s.accusation.from;
  if (!verifier.has(from)) return err('SIG_UNKNOWN_KEY', `accusation by unknown ${from}`);
  if (!verifier.verify(from, s.bytes, s.sig)) return err('SIG_INVALID', `accusation signature of ${from}`);
  return ok(s);
}

function ptpToWire(p: PtpPayload): PtpPayloadWire {
  return p.type === 'wrapper' ? { type: 'wrapper', rsn: p.rsn, cgBytes: p.signed.bytes, cgSig: p.signed.sig } : p;
}

/** The wire form of an item: signed CGs travel as their signer's bytes and signature. */
export function itemToWire(item: Item): ItemWire {
  switch (item.type) {
    case 'grp':
      return item.body.type === 'cg'
        ? { ...item, body: { type: 'cg', bytes: item.body.signed.bytes, sig: item.body.signed.sig } }
        : { ...item, body: item.body };
    case 'ptp':
      return { ...item, body: item.body === null ? null : ptpToWire(item.body) };
    case 'op.request':
      return { type: 'op.request', bytes: item.signed.bytes, sig: item.signed.sig };
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
      if (body !== null && body.type === 'accuse') {
        const v = verifyAccusation(body.signed, verifier);
        if (!v.ok) return v;
        // A replica sends only its own accusations; evidence travels inside replica.condemn.
        if (body.signed.accusation.from !== from) return err('SIG_INVALID', `accusation of ${body.signed.accusation.from} sent by ${from}`);
      }
      if (body !== null && body.type === 'wrapper.input' && body.input.type === 'replica.condemn') {
        for (const e of body.input.evidence) {
          const v = verifyAccusation(e, verifier);
          if (!v.ok) return v;
        }
      }
      if (body === null || body.type !== 'wrapper') return ok({ ...item, body });
      const signed = openCG(body.cgBytes, body.cgSig, verifier);
      if (!signed.ok) return signed;
      return ok({ ...item, body: { type: 'wrapper', rsn: body.rsn, signed: signed.value } });
    }
    case 'op.request': {
      const signed = openCG(item.bytes, item.sig, verifier);
      if (!signed.ok) return signed;
      // An operator sends only its own requests; replicas never relay them as op.request.
      if (signed.value.cg.client !== from) return err('SIG_INVALID', `request of ${signed.value.cg.client} sent by ${from}`);
      return ok({ type: 'op.request', signed: signed.value });
    }
    default:
      return ok(item);
  }
}

const textEncoder = new TextEncoder();

export function encodeFrame(frame: Frame, ctx: EncodeContext): Uint8Array {
  const id = textEncoder.encode(ctx.signer.id);
  assert(id.length >= 1 && id.length <= MAX_ID_CHARS && PROCESS_ID_PATTERN.test(ctx.signer.id), `bad sender id ${ctx.signer.id}`);
  const body = pack(frameBody.enc({ cluster: ctx.cluster, to: frame.to, items: frame.items.map(itemToWire) }));
  const link = ctx.linkAuth;
  const mac = link !== undefined && link.id === ctx.signer.id && link.has(frame.to) && !frame.items.some(needsFrameSignature);
  const signedLength = 2 + id.length + body.length;
  const out = new Uint8Array(signedLength + 4 + (mac ? MAC_BYTES : SIGNATURE_BYTES));
  out[0] = mac ? WIRE_VERSION_MAC : WIRE_VERSION;
  out[1] = id.length;
  out.set(id, 2);
  out.set(body, 2 + id.length);
  const signed = out.subarray(0, signedLength);
  new DataView(out.buffer).setUint32(signedLength, crc32(signed), false);
  const auth = mac ? link.tag(frame.to, signed) : ctx.signer.sign(signed);
  assert(auth !== null && auth.length === (mac ? MAC_BYTES : SIGNATURE_BYTES), `authenticator for ${frame.to}`);
  out.set(auth, signedLength + 4);
  return out;
}

type Header = { from: ProcessId; bodyStart: number; signedEnd: number; mac: boolean };

/** Read the fixed header: version and sender, without touching the msgpack body. */
function readHeader(data: Uint8Array): Result<Header> {
  if (data.length < MIN_MAC_FRAME_BYTES) return err('WIRE_TOO_SHORT', `${data.length} bytes`);
  if (data.length > MAX_FRAME_BYTES) return err('WIRE_TOO_LARGE', `${data.length} bytes > ${MAX_FRAME_BYTES}`);
  if (data[0] !== WIRE_VERSION && data[0] !== WIRE_VERSION_MAC) return err('WIRE_VERSION', `version ${data[0]}`);
  const mac = data[0] === WIRE_VERSION_MAC;
  if (!mac && data.length < MIN_FRAME_BYTES) return err('WIRE_TOO_SHORT', `${data.length} bytes`);
  const n = data[1] as number;
  const signedEnd = data.length - 4 - (mac ? MAC_BYTES : SIGNATURE_BYTES);
  if (n === 0 || n > MAX_ID_CHARS || 2 + n >= signedEnd) return err('WIRE_MALFORMED', `sender id of ${n} bytes`);
  let from = '';
  for (let i = 2; i < 2 + n; i++) from += String.fromCharCode(data[i] as number);
  if (!PROCESS_ID_PATTERN.test(from)) return err('WIRE_MALFORMED', 'sender id characters');
  return ok({ from, bodyStart: 2 + n, signedEnd, mac });
}

/** Decode, check and verify one frame. Every failure is a typed drop reason (STYLE.md 5). */
export function decodeFrame(data: Uint8Array, ctx: DecodeContext): Result<Frame> {
  if (!(data instanceof Uint8Array)) return err('WIRE_MALFORMED', 'not bytes');
  const h = readHeader(data);
  if (!h.ok) return h;
  const { from, bodyStart, signedEnd, mac } = h.value;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (view.getUint32(signedEnd, false) !== crc32(data, signedEnd)) return err('WIRE_CHECKSUM', 'crc32 mismatch');
  if (mac) {
    if (ctx.linkAuth === undefined || !ctx.linkAuth.has(from)) return err('SIG_UNKNOWN_KEY', `no link key for ${from}`);
    if (!ctx.linkAuth.check(from, data.subarray(0, signedEnd), data.subarray(signedEnd + 4))) return err('MAC_INVALID', `frame of ${from}`);
  } else {
    if (!ctx.verifier.has(from)) return err('SIG_UNKNOWN_KEY', `sender ${from}`);
    if (!ctx.verifier.verify(from, data.subarray(0, signedEnd), data.subarray(signedEnd + 4))) return err('SIG_INVALID', `frame of ${from}`);
  }
  // Authenticated from here on: what follows is evidence against `from` if it is wrong.
  const tree = unpack(data.subarray(bodyStart, signedEnd));
  if (!tree.ok) return tree;
  const body = frameBody.dec(tree.value, 'frame');
  if (!body.ok) return body;
  const b = body.value;
  if (b.cluster !== ctx.cluster) return err('WIRE_FOREIGN_CLUSTER', `cluster ${b.cluster}`);
  if (b.to !== ctx.self) return err('WIRE_MISADDRESSED', `frame for ${b.to}`);
  let signedItems = 0;
  for (const w of b.items) signedItems += embeddedSignatures(w);
  if (signedItems > MAX_SIGNED_ITEMS_PER_FRAME) return err('WIRE_LIMIT', `${signedItems} signed requests > ${MAX_SIGNED_ITEMS_PER_FRAME}`);
  if (mac && b.items.some(needsFrameSignature)) return err('SIG_REQUIRED', `an order from ${from} in a MAC'd frame`);
  const items: Item[] = [];
  for (const w of b.items) {
    const r = itemFromWire(w, from, ctx.verifier);
    if (!r.ok) return r;
    items.push(r.value);
  }
  return ok({ from, to: b.to, items });
}

/** The claimed sender of a frame, from its header, unverified (transport routing only). */
export function peekSender(data: Uint8Array): ProcessId | null {
  const h = readHeader(data);
  return h.ok ? h.value.from : null;
}
