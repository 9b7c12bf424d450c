import { expect } from "chai";
import { generateKeyPairSync, webcrypto } from "node:crypto";
import type { LookupAddress } from "node:dns";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import {
  admitCallbackHost,
  callbackRequestOptions,
  checkResolvedAddresses,
  createHttpCallbackTransport,
  httpCallbackTransport,
  isLoopbackAddress,
  isNonPublicAddress,
  isNonPublicIpLiteral,
  pinnedLookup,
  postCallback,
  type CallbackRequest,
  type ResolvedAddress,
} from "../../../node/schedules/callbackGuard";
import { ECDSA_P256_SHA256, x509 } from "../../../protocol/x509";

const LOOPBACK: ResolvedAddress[] = [{ address: "127.0.0.1", family: 4 }];

function request(url: string, addresses: readonly ResolvedAddress[], signal = new AbortController().signal): CallbackRequest {
  return { url: new URL(url), addresses, headers: { "content-type": "application/json", "idempotency-key": "id-1" }, body: '{"id":"id-1"}', signal };
}

/** Calls a pinned lookup the way node:net does and returns what it answered. */
function lookUp(hostname: string, addresses: readonly ResolvedAddress[], options: { all?: boolean; family?: number }) {
  return new Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family: number | undefined }>((resolve) =>
    pinnedLookup(hostname, addresses)(hostname, options, (error, address, family) =>
      resolve({ error, address, family }),
    ),
  );
}

interface Received {
  host: string | undefined;
  servername: string | false | null | undefined;
  headers: IncomingMessage["headers"];
  body: string;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function recordingHandler(received: Received[], status = 200) {
  return (incoming: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const socket = incoming.socket as Partial<TLSSocket>;
      received.push({ host: incoming.headers.host, servername: socket.servername, headers: incoming.headers, body: Buffer.concat(chunks).toString() });
      response.statusCode = status;
      response.end("a body the node does not read");
    });
  };
}

/** A self-signed P-256 certificate for DNS name `dnsName` only (no IP SAN). */
async function selfSigned(dnsName: string): Promise<{ key: string; cert: string }> {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const keys = {
    privateKey: (await webcrypto.subtle.importKey("pkcs8", privateKey.export({ format: "der", type: "pkcs8" }), ECDSA_P256_SHA256, false, [
      "sign",
    ])) as CryptoKey,
    publicKey: (await webcrypto.subtle.importKey("spki", publicKey.export({ format: "der", type: "spki" }), ECDSA_P256_SHA256, true, [
      "verify",
    ])) as CryptoKey,
  };
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: `CN=${dnsName}`,
    notBefore: new Date(Date.now() - 86_400_000),
    notAfter: new Date(Date.now() + 86_400_000),
    signingAlgorithm: ECDSA_P256_SHA256,
    keys,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: "dns", value: dnsName }])],
  });
  return { key: privateKey.export({ format: "pem", type: "pkcs8" }).toString(), cert: certificate.toString("pem") };
}

describe("callback guard: address classification", () => {
  it("classifies resolved addresses as public or non-public, IPv6-embedded IPv4 by the IPv4", () => {
    const nonPublic = [
      "0.0.0.0", "0.1.2.3", "10.0.0.5", "100.64.0.1", "100.127.255.255", "127.0.0.1", "127.255.0.9", "169.254.169.254",
      "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.0", "198.19.255.255",
      "198.51.100.7", "203.0.113.7", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
      "::", "::1", "fe80::1", "fe80::1%eth0", "febf::1", "fec0::1", "fc00::1", "fd12:3456::1", "ff02::1",
      "::ffff:10.0.0.1", "::ffff:a00:1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::10.0.0.1",
      "64:ff9b::10.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:a00:1::1", "2002:7f00:1::", "2001:db8::1",
      "2001::1", "100::1", "3fff::1",
      "not an address", "", "[::1]", "010.0.0.1",
    ];
    const isPublic = [
      "8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
      "192.0.1.1", "192.169.0.1", "198.17.255.255", "198.20.0.0", "223.255.255.255", "169.253.0.1",
      "2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
    ];
    for (const address of nonPublic) expect(isNonPublicAddress(address), address).to.equal(true);
    for (const address of isPublic) expect(isNonPublicAddress(address), address).to.equal(false);
  });

  it("classifies loopback addresses", () => {
    for (const address of ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"]) expect(isLoopbackAddress(address), address).to.equal(true);
    for (const address of ["10.0.0.1", "::", "fe80::1", "8.8.8.8", "localhost", ""]) expect(isLoopbackAddress(address), address).to.equal(false);
  });

  it("classifies URL host literals and leaves host names to resolution", () => {
    for (const host of ["169.254.169.254", "10.0.0.1", "[fd00::1]", "[::ffff:a00:1]", "[64:ff9b::a00:1]", "198.18.0.1"]) {
      expect(isNonPublicIpLiteral(host), host).to.equal(true);
    }
    for (const host of ["93.184.216.34", "[2606:4700:4700::1111]", "dapp.example", "localhost", "evil.test"]) {
      expect(isNonPublicIpLiteral(host), host).to.equal(false);
    }
  });
});

describe("callback guard: admission and resolved addresses", () => {
  it("admits listed hosts (IPs in any notation), loopback hosts, and wildcard names and public literals", () => {
    expect(admitCallbackHost("receiver.internal", ["receiver.internal"])).to.equal("listed");
    expect(admitCallbackHost("[fd00::1]", ["fd00:0::1"])).to.equal("listed");
    expect(admitCallbackHost("10.0.0.1", ["*", "10.0.0.1"])).to.equal("listed");
    expect(admitCallbackHost("localhost", [])).to.equal("loopback");
    expect(admitCallbackHost("[::1]", [])).to.equal("loopback");
    expect(admitCallbackHost("evil.test", ["*"])).to.equal("wildcard");
    expect(admitCallbackHost("93.184.216.34", ["*"])).to.equal("wildcard");
    expect(admitCallbackHost("10.0.0.1", ["*"])).to.equal(null);
    expect(admitCallbackHost("evil.test", [])).to.equal(null);
    expect(admitCallbackHost("evil.test", ["other.test"])).to.equal(null);
  });

  it("refuses a wildcard name resolving to any non-public address, naming it", () => {
    const at = (...addresses: string[]) => addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }) as ResolvedAddress);
    expect(checkResolvedAddresses("good.test", "wildcard", at("93.184.216.34", "2606:4700:4700::1111"), ["*"])).to.equal(null);
    for (const bad of ["10.0.0.5", "169.254.169.254", "127.0.0.1", "::1", "fe80::1", "::ffff:10.0.0.1", "fc00::1", "100.64.0.1", "0.0.0.0"]) {
      expect(checkResolvedAddresses("evil.test", "wildcard", at("93.184.216.34", bad), ["*"]), bad).to.equal(
        `callback host evil.test resolved to ${bad}, a non-public address (list it in scheduleAllowedCallbackHosts to allow)`,
      );
    }
    // An exactly listed IP is acceptable whatever name leads to it.
    expect(checkResolvedAddresses("alias.test", "wildcard", at("10.0.0.5"), ["*", "10.0.0.5"])).to.equal(null);
    expect(checkResolvedAddresses("evil.test", "wildcard", [], ["*"])).to.equal("callback host evil.test resolved to no address");
  });

  it("trusts a listed name to resolve privately, and holds localhost to loopback", () => {
    const private10 = [{ address: "10.0.0.5", family: 4 } as const];
    expect(checkResolvedAddresses("receiver.internal", "listed", private10, ["receiver.internal"])).to.equal(null);
    expect(checkResolvedAddresses("localhost", "loopback", [...LOOPBACK, { address: "::1", family: 6 }], [])).to.equal(null);
    expect(checkResolvedAddresses("localhost", "loopback", private10, [])).to.contain("resolved to 10.0.0.5, not a loopback address");
  });

  it("checks every attempt against the addresses resolved for it, and skips the resolver for IP literals", async () => {
    const answers: ResolvedAddress[][] = [[{ address: "93.184.216.34", family: 4 }], [{ address: "10.0.0.5", family: 4 }]];
    const resolved: string[] = [];
    const sent: CallbackRequest[] = [];
    const attempt = (url: string) =>
      postCallback({
        url,
        allowedHosts: ["*"],
        headers: {},
        body: "{}",
        signal: new AbortController().signal,
        resolveHost: async (hostname) => {
          resolved.push(hostname);
          return answers.shift() ?? [];
        },
        transport: async (sending) => {
          sent.push(sending);
          return 204;
        },
      });
    expect(await attempt("https://flip.test/cb")).to.equal(null);
    expect(await attempt("https://flip.test/cb")).to.equal(
      "callback host flip.test resolved to 10.0.0.5, a non-public address (list it in scheduleAllowedCallbackHosts to allow)",
    );
    expect(sent.map((entry) => entry.addresses)).to.deep.equal([[{ address: "93.184.216.34", family: 4 }]]);
    expect(await attempt("https://[2606:4700:4700::1111]/cb")).to.equal(null);
    expect(resolved).to.deep.equal(["flip.test", "flip.test"]);
    expect(sent[1]!.addresses).to.deep.equal([{ address: "2606:4700:4700::1111", family: 6 }]);
    expect(await attempt("http://10.0.0.1/cb")).to.contain("callback host 10.0.0.1 is no longer allowed");
    expect(sent).to.have.length(2);
  });

  it("gives up on a resolution that outlasts the attempt's signal", async () => {
    const signal = AbortSignal.timeout(20);
    let caught: unknown;
    try {
      await postCallback({
        url: "https://slow.test/",
        allowedHosts: ["*"],
        headers: {},
        body: "{}",
        signal,
        resolveHost: () => new Promise(() => undefined),
        transport: async () => 200,
      });
    } catch (error) {
      caught = error;
    }
    expect((caught as Error).name).to.equal("TimeoutError");
  });
});

describe("callback guard: pinned connections", function () {
  this.timeout(20_000);
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await close(server);
  });

  it("answers only the checked addresses, for the pinned name only, honouring all and family", async () => {
    const both: ResolvedAddress[] = [{ address: "93.184.216.34", family: 4 }, { address: "2606:4700:4700::1111", family: 6 }];
    expect(await lookUp("pinned.test", both, { all: true })).to.deep.include({ error: null, address: both });
    expect(await lookUp("pinned.test", both, {})).to.deep.include({ error: null, address: "93.184.216.34", family: 4 });
    expect(await lookUp("pinned.test", both, { family: 6 })).to.deep.include({ error: null, address: "2606:4700:4700::1111", family: 6 });
    expect((await lookUp("pinned.test", [both[0]!], { family: 6 })).error?.code).to.equal("ENOTFOUND");
    const other = await new Promise<NodeJS.ErrnoException | null>((resolve) => pinnedLookup("pinned.test", both)("other.test", {}, (error) => resolve(error)));
    expect(other?.code).to.equal("ENOTFOUND");
  });

  it("keeps the host name for Host, SNI and the certificate check; only the lookup is pinned", () => {
    const secure = callbackRequestOptions(request("https://Receiver.Test:8443/cb?x=1", LOOPBACK));
    expect(secure).to.include({ hostname: "receiver.test", servername: "receiver.test", port: 8443, path: "/cb?x=1", method: "POST", agent: false });
    expect(secure.headers).to.deep.include({ "content-length": "13", "idempotency-key": "id-1" });
    expect(secure.lookup).to.be.a("function");
    const plain = callbackRequestOptions(request("http://receiver.test/cb", LOOPBACK));
    expect(plain).to.include({ hostname: "receiver.test", port: 80 });
    expect(plain).to.not.have.property("servername");
    // No SNI for an IP host (RFC 6066); IPv6 loses its URL brackets.
    const literal = callbackRequestOptions(request("https://[2606:4700:4700::1111]/cb", [{ address: "2606:4700:4700::1111", family: 6 }]));
    expect(literal).to.include({ hostname: "2606:4700:4700::1111", port: 443 });
    expect(literal).to.not.have.property("servername");
  });

  it("connects a name that has no DNS record to the checked address, sending the name as Host", async () => {
    const received: Received[] = [];
    const server = createServer(recordingHandler(received, 202));
    servers.push(server);
    const port = await listen(server);
    // receiver.test (RFC 6761) resolves nowhere: only the pinned lookup can have connected it.
    const status = await httpCallbackTransport(request(`http://receiver.test:${port}/cb?q=1`, LOOPBACK));
    expect(status).to.equal(202);
    expect(received).to.have.length(1);
    expect(received[0]).to.deep.include({ host: `receiver.test:${port}`, body: '{"id":"id-1"}' });
    expect(received[0]!.headers).to.deep.include({ "content-type": "application/json", "idempotency-key": "id-1" });
  });

  it("does not follow redirects and reports the status", async () => {
    const server = createServer((_incoming, response) => {
      response.writeHead(302, { location: "http://169.254.169.254/latest/meta-data" }).end();
    });
    servers.push(server);
    const port = await listen(server);
    expect(await httpCallbackTransport(request(`http://receiver.test:${port}/`, LOOPBACK))).to.equal(302);
  });

  it("aborts with the signal's reason when the receiver never answers", async () => {
    const server = createServer(() => undefined);
    servers.push(server);
    const port = await listen(server);
    let caught: unknown;
    try {
      await httpCallbackTransport(request(`http://receiver.test:${port}/`, LOOPBACK, AbortSignal.timeout(100)));
    } catch (error) {
      caught = error;
    }
    expect((caught as Error).name).to.equal("TimeoutError");
  });

  it("verifies TLS against the host name (SNI and certificate), connecting to the pinned address", async () => {
    const { key, cert } = await selfSigned("callback.test");
    const received: Received[] = [];
    const server = createTlsServer({ key, cert }, recordingHandler(received));
    servers.push(server);
    const port = await listen(server);
    const transport = createHttpCallbackTransport({ ca: cert });
    expect(await transport(request(`https://callback.test:${port}/cb`, LOOPBACK))).to.equal(200);
    expect(received[0]).to.deep.include({ host: `callback.test:${port}`, servername: "callback.test" });
    // The same address under another name fails the certificate check: the name, not the IP, is verified.
    let caught: unknown;
    try {
      await transport(request(`https://other.test:${port}/cb`, LOOPBACK));
    } catch (error) {
      caught = error;
    }
    expect((caught as NodeJS.ErrnoException).code).to.equal("ERR_TLS_CERT_ALTNAME_INVALID");
    expect(received).to.have.length(1);
  });
});
