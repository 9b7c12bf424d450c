/**
 * The network manifest: the machine-readable source of truth about one network, which clients check endpoints
 * against (docs/protocol.md §9.5): the service catalog's endpoints (explorer, rpc, faucet, names, time host, …),
 * the chain's genesis hash and EVM chain id, whether its time is NTS-verified, bootnodes, the mesh's peers with
 * their node ids, contract addresses and the trusted card roots. A closed schema, plus the catalog's rules:
 *
 * - a bootnode is a whole multiaddress `/dns4/<host>/tcp/30333/ws/p2p/<peer id>` (never split into parts);
 * - an evidence identifier is a CIDv1 with the raw codec and a sha2-256 multihash (base32, "b…"), nothing else;
 * - no secrets anywhere: a key named like a secret, or a value that looks like a private key, refuses the file;
 * - the time host (`time-host`, the catalog's `{time_host}`: public UTC over NTPv4, docs/protocol.md §9.8) is an
 *   `ntp://host:port` endpoint, and no other service is: NTP is UDP, every other service is HTTP or WebSocket.
 *   Whether its time is NTS-authenticated is `chain.ntsVerified` (false while the nodes offer no NTS).
 */
import { Type, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { ValidationError } from "../protocol/errors";

export const MANIFEST_VERSION = "ats-manifest/1";

const Url = Type.String({ pattern: "^(https?|wss?)://[^\\s]{1,2040}$" });
/** A catalog endpoint: a Url, or ntp:// for the time host (checked further in parseManifest). */
const ServiceUrl = Type.String({ pattern: "^(https?|wss?|ntp)://[^\\s]{1,2040}$" });
/** The catalog name of the NTP time host, and the shape of its endpoint: ntp://host:port (IPv6 bracketed). */
export const TIME_HOST_SERVICE = "time-host";
const NTP_ENDPOINT = /^ntp:\/\/(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9.-]{1,253}):([1-9][0-9]{0,4})$/;
const Address = Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" });

export const ManifestSchema = Type.Object(
  {
    version: Type.Literal(MANIFEST_VERSION),
    name: Type.String({ pattern: "^[a-z][a-z0-9-]{0,63}$" }),
    chain: Type.Object(
      {
        evmChainId: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
        genesisHash: Type.String({ pattern: "^0x[0-9a-f]{64}$" }),
        /** Whether the network's time is verified by NTS (RFC 8915) end to end. */
        ntsVerified: Type.Boolean(),
      },
      { additionalProperties: false },
    ),
    /**
     * The service catalog: name → endpoint. `rpc` and `time` are required; others (explorer, faucet, names,
     * `time-host`: ntp://host:port, …) optional.
     */
    services: Type.Intersect([Type.Object({ rpc: Url, time: Url }), Type.Record(Type.String({ pattern: "^[a-z][a-z0-9-]{0,31}$" }), ServiceUrl)]),
    bootnodes: Type.Array(Type.String({ maxLength: 512 }), { maxItems: 64 }),
    meshPeers: Type.Array(Type.Object({ nodeId: Address, endpoint: Url }, { additionalProperties: false }), { maxItems: 32 }),
    contracts: Type.Record(Type.String({ pattern: "^[A-Za-z][A-Za-z0-9]{0,63}$" }), Address),
    trustedCardRootsPem: Type.Array(Type.String({ maxLength: 16_384 }), { maxItems: 16 }),
    /** Evidence (audits, attestations) by CID. */
    evidence: Type.Optional(Type.Array(Type.String({ maxLength: 128 }), { maxItems: 64 })),
  },
  { additionalProperties: false },
);
export type NetworkManifest = Static<typeof ManifestSchema>;

const BOOTNODE = /^\/dns4\/[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\/tcp\/30333\/ws\/p2p\/(12D3KooW[1-9A-HJ-NP-Za-km-z]{44}|Qm[1-9A-HJ-NP-Za-km-z]{44})$/;
const SECRET_KEY_NAME = /(private|secret|password|passphrase|mnemonic|seed|apikey|api_key|token)/i;
const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/** RFC 4648 base32 (lower case, no padding) → bytes; null on a character outside the alphabet. */
function base32Decode(text: string): Uint8Array | null {
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const char of text) {
    const index = BASE32.indexOf(char);
    if (index < 0) return null;
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Uint8Array.from(out);
}

/** Whether `cid` is a CIDv1, raw codec (0x55), sha2-256 multihash (0x12, 32 bytes), in base32 ("b…"). */
export function isRawSha256CidV1(cid: string): boolean {
  if (!cid.startsWith("b")) return false;
  const bytes = base32Decode(cid.slice(1));
  return bytes !== null && bytes.length === 36 && bytes[0] === 0x01 && bytes[1] === 0x55 && bytes[2] === 0x12 && bytes[3] === 0x20;
}

/** Every (path, key, string value) of a JSON value, to look for secrets. */
function* walk(value: unknown, path: string): Generator<{ path: string; key: string; text: string | null }> {
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) yield* walk(item, `${path}/${index}`);
  } else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      yield { path: `${path}/${key}`, key, text: typeof item === "string" ? item : null };
      yield* walk(item, `${path}/${key}`);
    }
  } else if (typeof value === "string") {
    yield { path, key: "", text: value };
  }
}

/** Validates a parsed manifest: the schema, then the catalog rules. Throws ValidationError naming the field. */
export function parseManifest(json: unknown): NetworkManifest {
  // Secrets first: an error message about another field must never be the only thing standing between a leaked key
  // and a "fixed" file.
  for (const { path, key, text } of walk(json, "manifest")) {
    if (SECRET_KEY_NAME.test(key)) throw new ValidationError(path, "looks like a secret: a manifest is public and holds none");
    if (text !== null && (/PRIVATE KEY-----/.test(text) || /^(0x)?[0-9a-fA-F]{64}$/.test(text.trim()) && !path.endsWith("genesisHash"))) {
      throw new ValidationError(path, "holds what looks like a private key: a manifest is public and holds none");
    }
  }
  const problem = Value.Errors(ManifestSchema, json).First();
  if (problem !== undefined) throw new ValidationError(`manifest${problem.path}`, problem.message);
  const manifest = json as NetworkManifest;
  manifest.bootnodes.forEach((bootnode, index) => {
    if (!BOOTNODE.test(bootnode)) throw new ValidationError(`manifest/bootnodes/${index}`, "must be a whole multiaddress /dns4/<host>/tcp/30333/ws/p2p/<peer id>");
  });
  for (const [name, endpoint] of Object.entries(manifest.services)) {
    const isNtp = endpoint.startsWith("ntp://");
    if (name === TIME_HOST_SERVICE) {
      const match = NTP_ENDPOINT.exec(endpoint);
      if (match === null || Number(match[2]) > 65_535) throw new ValidationError(`manifest/services/${name}`, "must be ntp://<host>:<port> (the NTP time host, UDP)");
    } else if (isNtp) {
      throw new ValidationError(`manifest/services/${name}`, `an ntp:// endpoint is only for ${TIME_HOST_SERVICE}: every other service is http(s) or ws(s)`);
    }
  }
  (manifest.evidence ?? []).forEach((cid, index) => {
    if (!isRawSha256CidV1(cid)) throw new ValidationError(`manifest/evidence/${index}`, "must be a CIDv1, raw codec, sha2-256 (base32 \"b…\")");
  });
  return manifest;
}
