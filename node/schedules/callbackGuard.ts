/**
 * The SSRF guard of scheduled callbacks: which callback hosts are admitted, which addresses they may resolve to,
 * and an HTTP transport that connects only to the addresses that were checked.
 *
 * A callback host is admitted (at schedule time and again at every delivery attempt) when it is
 * - listed exactly in `allowedHosts` (a host name, or an IP with or without brackets): the operator trusts it,
 *   so a listed NAME may resolve to private addresses (internal receivers are listed on purpose);
 * - a loopback host (localhost, 127.0.0.0/8, [::1]): localhost must resolve to loopback addresses only;
 * - or, with the wildcard "*", any host name or public IP literal: every address the name resolves to must be
 *   public.
 * An address that is itself listed exactly is acceptable whatever the admission.
 *
 * Detail: docs/protocol.md §9.7.
 */
import { promises as dns, type LookupAddress, type LookupOptions } from "node:dns";
import http from "node:http";
import https from "node:https";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { untilAborted } from "../core/abort";

/*
 * Each attempt resolves the host once (`ResolveHost`, all addresses), checks every address, then connects with a
 * `lookup` that answers only those addresses: no second resolution between check and connect, so DNS
 * rebinding cannot swap in another address. TLS still verifies the certificate against the host name (the
 * request keeps the name as `host` and `servername`; only the address lookup is pinned).
 */
// ---------------------------------------------------------------------------------------------------------------
// Address classification (pure)

/**
 * IPv4 ranges that are not globally reachable or are special-purpose (IANA IPv4 Special-Purpose Address
 * Registry, plus multicast and the reserved 240/4). Also applied to the IPv4 embedded in IPv4-mapped
 * (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) IPv6 addresses.
 */
const NON_PUBLIC_IPV4: readonly (readonly [string, number])[] = [
  ["0.0.0.0", 8], // "this network", incl. the unspecified 0.0.0.0
  ["10.0.0.0", 8], // private
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local, incl. cloud metadata 169.254.169.254
  ["172.16.0.0", 12], // private
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // TEST-NET-1
  ["192.88.99.0", 24], // 6to4 relay anycast (deprecated)
  ["192.168.0.0", 16], // private
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // TEST-NET-2
  ["203.0.113.0", 24], // TEST-NET-3
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, incl. broadcast 255.255.255.255
];

/** IPv6 ranges that are not globally reachable or are special-purpose (IANA IPv6 Special-Purpose Registry). */
const NON_PUBLIC_IPV6: readonly (readonly [string, number])[] = [
  ["::", 96], // unspecified, loopback ::1, deprecated IPv4-compatible
  ["64:ff9b:1::", 48], // local-use NAT64
  ["100::", 64], // discard-only
  ["2001::", 23], // IETF protocol assignments (Teredo, benchmarking, ORCHID…)
  ["2001:db8::", 32], // documentation
  ["3fff::", 20], // documentation
  ["5f00::", 16], // SRv6 SIDs
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8], // multicast
];

/** The IPv4 `a.b.c.d` as the two 16-bit hex groups 6to4 embeds after 2002:. */
function ipv4HexGroups(ipv4: string): string {
  const [a, b, c, d] = ipv4.split(".").map(Number) as [number, number, number, number];
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

function blockList(v4: readonly (readonly [string, number])[], v6: readonly (readonly [string, number])[]): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of v4) {
    list.addSubnet(network, prefix, "ipv4");
    // BlockList already matches IPv4-mapped IPv6 against IPv4 rules; the mapped rule states it explicitly.
    list.addSubnet(`::ffff:${network}`, 96 + prefix, "ipv6");
    list.addSubnet(`64:ff9b::${network}`, 96 + prefix, "ipv6");
    list.addSubnet(`2002:${ipv4HexGroups(network)}::`, 16 + prefix, "ipv6");
  }
  for (const [network, prefix] of v6) list.addSubnet(network, prefix, "ipv6");
  return list;
}

const NON_PUBLIC = blockList(NON_PUBLIC_IPV4, NON_PUBLIC_IPV6);
const LOOPBACK = (() => {
  const list = new BlockList();
  list.addSubnet("127.0.0.0", 8, "ipv4");
  list.addSubnet("::ffff:127.0.0.0", 104, "ipv6");
  list.addAddress("::1", "ipv6");
  return list;
})();

/** Strips an IPv6 zone ("fe80::1%eth0") and URL brackets ("[::1]"). */
function bareAddress(address: string): string {
  const unbracketed = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  const zone = unbracketed.indexOf("%");
  return zone === -1 ? unbracketed : unbracketed.slice(0, zone);
}

function classify(list: BlockList, address: string): boolean | null {
  const bare = bareAddress(address);
  const version = isIP(bare);
  if (version === 0) return null;
  return list.check(bare, version === 4 ? "ipv4" : "ipv6");
}

/**
 * Whether a plain IP address (as dns.lookup returns it: "10.0.0.5", "fe80::1%eth0", "::ffff:10.0.0.1") is
 * non-public: private, loopback, link-local, CGNAT, documentation, benchmarking, reserved, multicast,
 * unspecified, IPv6 ULA, or an IPv6 address embedding such an IPv4 (mapped, NAT64, 6to4). Anything that is not
 * an IP address counts as non-public (fail closed).
 */
export function isNonPublicAddress(address: string): boolean {
  return classify(NON_PUBLIC, address) ?? true;
}

/** Whether a plain IP address is loopback (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104). */
export function isLoopbackAddress(address: string): boolean {
  return classify(LOOPBACK, address) ?? false;
}

const LOOPBACK_IPV4 = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** A loopback URL host (WHATWG serialisation): localhost, 127.0.0.0/8 or [::1]. */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || LOOPBACK_IPV4.test(hostname);
}

/**
 * An IP-literal URL host (dotted IPv4, bracketed IPv6) that is non-public (see isNonPublicAddress). Host names
 * are not IP literals: false.
 */
export function isNonPublicIpLiteral(hostname: string): boolean {
  return isIP(bareAddress(hostname)) !== 0 && isNonPublicAddress(hostname);
}

// ---------------------------------------------------------------------------------------------------------------
// Admission and the resolved-address check (pure)

/** Why a callback host is admitted: listed exactly, loopback, or the "*" wildcard. */
export type CallbackHostAdmission = "listed" | "loopback" | "wildcard";

/** An allowedHosts entry or a host/address, normalised for exact comparison (IPs canonical, unbracketed). */
function hostKey(value: string): string {
  const bare = bareAddress(value.toLowerCase());
  const version = isIP(bare);
  if (version === 0) return value.toLowerCase();
  // WHATWG URL prints the canonical form of an IP (IPv6 compressed, lower case).
  return bareAddress(new URL(`http://${version === 6 ? `[${bare}]` : bare}/`).hostname);
}

function isListed(value: string, allowedHosts: readonly string[]): boolean {
  const key = hostKey(value);
  return allowedHosts.some((entry) => entry !== "*" && hostKey(entry) === key);
}

/** How a URL host (lower case, WHATWG serialisation) is admitted by `allowedHosts`, or null if it is not. */
export function admitCallbackHost(hostname: string, allowedHosts: readonly string[]): CallbackHostAdmission | null {
  if (isListed(hostname, allowedHosts)) return "listed";
  if (isLoopbackHost(hostname)) return "loopback";
  if (allowedHosts.includes("*") && !isNonPublicIpLiteral(hostname)) return "wildcard";
  return null;
}

/** One resolved address of a callback host (the shape dns.lookup returns with `all: true`). */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/**
 * Checks the addresses a callback host resolved to, for one attempt. Returns null if the connection may use
 * every one of them, else the refusal (names the first offending address). A listed host may resolve anywhere;
 * a loopback host only to loopback; a wildcard host only to public addresses; a listed address is always fine.
 */
export function checkResolvedAddresses(
  hostname: string,
  admission: CallbackHostAdmission,
  addresses: readonly ResolvedAddress[],
  allowedHosts: readonly string[],
): string | null {
  if (addresses.length === 0) return `callback host ${hostname} resolved to no address`;
  if (admission === "listed") return null;
  for (const { address } of addresses) {
    if (isListed(address, allowedHosts)) continue;
    if (admission === "loopback" && !isLoopbackAddress(address)) {
      return `callback host ${hostname} resolved to ${address}, not a loopback address (list it in scheduleAllowedCallbackHosts to allow)`;
    }
    if (admission === "wildcard" && isNonPublicAddress(address)) {
      return `callback host ${hostname} resolved to ${address}, a non-public address (list it in scheduleAllowedCallbackHosts to allow)`;
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------------------
// Resolution and the pinned transport

/** Resolves a host name (never an IP literal) to all its addresses. */
export type ResolveHost = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** The system resolver (getaddrinfo, as node:net would use), all addresses in resolver order. */
export const systemResolveHost: ResolveHost = async (hostname) =>
  (await dns.lookup(hostname, { all: true })).map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));

/**
 * A `lookup` for node:net that answers `hostname` with `addresses` only (honouring the requested family and
 * `all`), so the socket connects to an address that was checked. Any other name is an error.
 */
export function pinnedLookup(hostname: string, addresses: readonly ResolvedAddress[]): LookupFunction {
  return (requested: string, options: LookupOptions, callback) => {
    const family = options.family === 4 || options.family === "IPv4" ? 4 : options.family === 6 || options.family === "IPv6" ? 6 : 0;
    const usable: LookupAddress[] = addresses.filter((entry) => family === 0 || entry.family === family).map((entry) => ({ ...entry }));
    const first = usable[0];
    if (requested !== hostname || first === undefined) {
      const error: NodeJS.ErrnoException = new Error(`pinned lookup has no ${family === 0 ? "" : `IPv${family} `}address for ${requested}`);
      error.code = "ENOTFOUND";
      callback(error, "", undefined);
      return;
    }
    if (options.all === true) callback(null, usable);
    else callback(null, first.address, first.family);
  };
}

/** One callback POST, to be sent to `addresses` (already checked) only. */
export interface CallbackRequest {
  url: URL;
  /** The checked addresses of url's host. */
  addresses: readonly ResolvedAddress[];
  headers: Readonly<Record<string, string>>;
  body: string;
  /** Aborts the attempt (timeout or shutdown); the transport rejects with its reason. */
  signal: AbortSignal;
}

/** Sends a callback POST and answers the HTTP status once the headers arrive (the body is discarded). */
export type CallbackTransport = (request: CallbackRequest) => Promise<number>;

/**
 * node:http(s) options for a request: the host NAME stays `hostname` (Host header) and `servername` (TLS SNI and
 * certificate check), the address lookup is pinned, no agent (a fresh connection per attempt, never a pooled
 * socket), redirects are never followed (node:http does not).
 */
export function callbackRequestOptions(request: CallbackRequest): https.RequestOptions {
  const { url } = request;
  const hostname = bareAddress(url.hostname);
  const secure = url.protocol === "https:";
  return {
    protocol: url.protocol,
    hostname,
    port: url.port === "" ? (secure ? 443 : 80) : Number(url.port),
    path: `${url.pathname}${url.search}`,
    method: "POST",
    headers: { ...request.headers, "content-length": String(Buffer.byteLength(request.body)) },
    lookup: pinnedLookup(hostname, request.addresses),
    agent: false,
    signal: request.signal,
    // SNI must not carry an IP (RFC 6066); for an IP host the certificate is checked against the IP.
    ...(secure && isIP(hostname) === 0 ? { servername: hostname } : {}),
  };
}

/**
 * The node:http(s) transport pinned to the checked addresses. `tls` adds TLS options (e.g. `ca` for a private
 * CA); it cannot change the host, the lookup or the method.
 */
export function createHttpCallbackTransport(tls: Pick<https.RequestOptions, "ca"> = {}): CallbackTransport {
  return (request) =>
    new Promise<number>((resolve, reject) => {
      const options = { ...tls, ...callbackRequestOptions(request) };
      const client = request.url.protocol === "https:" ? https : http;
      const outgoing = client.request(options, (response) => {
        resolve(response.statusCode ?? 0);
        response.destroy(); // the answer's body is not read; the connection closes (no agent)
      });
      // After an answer, the destroyed response may still surface here: the promise is already settled.
      outgoing.on("error", (error) => reject(request.signal.aborted ? (request.signal.reason as unknown) : error));
      outgoing.end(request.body);
    });
}

export const httpCallbackTransport: CallbackTransport = createHttpCallbackTransport();

export interface PostCallbackParameters {
  /** The stored (validated, normalised) callback URL. */
  url: string;
  allowedHosts: readonly string[];
  headers: Readonly<Record<string, string>>;
  body: string;
  signal: AbortSignal;
  resolveHost: ResolveHost;
  transport: CallbackTransport;
}

/**
 * One delivery attempt: admits the host against the current allowedHosts, resolves it (IP literals are their own
 * address), checks every address, then POSTs pinned to them. Returns null on a 2xx answer, else why the attempt
 * failed. Resolver and transport errors (including the abort reason) are thrown.
 */
export async function postCallback(parameters: PostCallbackParameters): Promise<string | null> {
  const url = new URL(parameters.url);
  const hostname = url.hostname.toLowerCase();
  const admission = admitCallbackHost(hostname, parameters.allowedHosts);
  if (admission === null) {
    return `callback host ${hostname} is no longer allowed (loopback only unless scheduleAllowedCallbackHosts lists it)`;
  }
  const bare = bareAddress(hostname);
  const version = isIP(bare);
  const addresses: readonly ResolvedAddress[] =
    version === 0 ? await untilAborted(parameters.resolveHost(bare), parameters.signal) : [{ address: bare, family: version === 6 ? 6 : 4 }];
  const refusal = checkResolvedAddresses(hostname, admission, addresses, parameters.allowedHosts);
  if (refusal !== null) return refusal;
  const status = await parameters.transport({
    url,
    addresses,
    headers: parameters.headers,
    body: parameters.body,
    signal: parameters.signal,
  });
  return status >= 200 && status <= 299 ? null : `callback answered HTTP ${status}`;
}
