/**
 * Releases fetched over HTTP (plan `release.source.url`; upgrade/fetchRelease.ts, upgrade/httpGet.ts), from a
 * loopback server on 127.0.0.1 (free ports) that serves a release built here:
 *
 * - a release is downloaded into the private folder, following a redirect within the origin, and verified;
 * - a tampered bundle is refused by the same checksum check as a folder's (bad-checksum);
 * - an oversized answer (declared, or chunked without a length) is cut off at its bound;
 * - a redirect to another origin is refused, and that origin is never contacted;
 * - a server that stalls (no headers; headers then a trickle) is cut off at the deadline;
 * - the agent refuses such a plan before reading anything else, and every refusal removes the private folder.
 *
 * Every server (and its open connections) is closed in afterEach(), also when a test fails.
 */
import { expect } from "chai";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { runUpgrade } from "../../upgrade/agent";
import { UpgradeRefusal } from "../../upgrade/errors";
import { fetchVerifiedRelease, type FetchOptions } from "../../upgrade/fetchRelease";
import { parsePlan, PLAN_VERSION, type BundlePlan } from "../../upgrade/plan";
import { buildRelease, type BuiltRelease } from "../../upgrade/release";
import { fakeDist, rejection } from "./helpers";

const REVISION = "0123456789abcdef0123456789abcdef01234567";
type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** The private fetch folders that exist now: a refusal must leave none behind. */
const fetchFolders = () => readdirSync(tmpdir()).filter((name) => name.startsWith("ats-upgrade-fetch-")).sort();

describe("upgrade: fetching a release over HTTP", function () {
  this.timeout(30_000);
  let root: string;
  let release: BuiltRelease;
  let servers: Server[];
  /** Paths each server was asked for, by origin. */
  let requests: Map<string, string[]>;

  /** Starts a server on 127.0.0.1 (a free port) answering with `handler`; returns its origin. */
  async function serve(handler: Handler): Promise<string> {
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", resolve);
    });
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    requests.set(origin, []);
    server.on("request", (request: IncomingMessage, response: ServerResponse) => {
      requests.get(origin)!.push(request.url ?? "");
      handler(request, response);
    });
    return origin;
  }

  /** Serves the release's files under /releases/v1.2.3/; `overrides` answers some paths instead (by file name). */
  const releaseHandler =
    (overrides: Record<string, Handler> = {}): Handler =>
    (request, response) => {
      const name = basename(request.url ?? "");
      const override = overrides[name];
      if (override !== undefined) return override(request, response);
      if (request.url !== `/releases/v1.2.3/${name}`) return void response.writeHead(404).end();
      try {
        const bytes = readFileSync(join(release.dir, name));
        response.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": String(bytes.length) }).end(bytes);
      } catch {
        response.writeHead(404).end();
      }
    };

  const approved = (url: string): BundlePlan["release"] => ({
    tag: "v1.2.3",
    release_id: release.metadata.release_id,
    source_revision: REVISION,
    artifact: { kind: "bundle", sha256: release.metadata.bundle.sha256 },
    source: { url },
  });

  /** Expects the fetch to be refused with `code` and a message matching `pattern`, leaving no private folder. */
  async function refused(url: string, code: string, pattern: RegExp, options: FetchOptions = {}): Promise<UpgradeRefusal> {
    const before = fetchFolders();
    // A fetch that wrongly succeeds still removes its folder: a failing test leaves nothing behind.
    const fetched = fetchVerifiedRelease(approved(url), options).then((verified) => {
      verified.dispose();
      throw new Error("verified, but a refusal was expected");
    });
    const refusal = await rejection(fetched, UpgradeRefusal, pattern);
    expect(refusal.code).to.equal(code);
    expect(fetchFolders()).to.deep.equal(before);
    return refusal;
  }

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ats-fetch-http-"));
    release = buildRelease({ distDir: fakeDist(root, "1.2.3"), outDir: join(root, "out"), sourceRevision: REVISION, sourceTreeDirty: false, sourceDateEpochS: 1_700_000_000, buildTime: new Date("2026-01-02T03:04:05Z") });
    servers = [];
    requests = new Map();
  });
  afterEach(async () => {
    await Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      ),
    );
    rmSync(root, { recursive: true, force: true });
  });

  it("downloads the release into a private folder, following a redirect within the origin, and verifies it there", async () => {
    // /latest/ is where an operator's release server points at the current folder.
    const origin = await serve((request, response) => {
      if (request.url?.startsWith("/latest/") === true) return void response.writeHead(302, { Location: `/releases/v1.2.3/${basename(request.url)}` }).end();
      releaseHandler()(request, response);
    });
    const before = fetchFolders();
    const verified = await fetchVerifiedRelease(approved(`${origin}/latest`));
    try {
      expect(verified.metadata.release_id).to.equal(release.metadata.release_id);
      expect(verified.metadata.bundle.sha256).to.equal(release.metadata.bundle.sha256);
      expect(readdirSync(verified.treeDir)).to.include("BUILD-REVISION.json");
      expect(fetchFolders()).to.have.length(before.length + 1);
    } finally {
      verified.dispose();
    }
    expect(fetchFolders()).to.deep.equal(before);
    const bundle = release.metadata.bundle.name;
    expect(requests.get(origin)).to.deep.equal(["SHA256SUMS", "BUILD-METADATA.json", bundle].flatMap((name) => [`/latest/${name}`, `/releases/v1.2.3/${name}`]));
  });

  it("refuses a tampered bundle by the SHA256SUMS check (bad-checksum), as from a folder", async () => {
    const tampered = Buffer.from(readFileSync(release.bundlePath));
    tampered[tampered.length - 10]! ^= 0xff;
    const origin = await serve(releaseHandler({ [release.metadata.bundle.name]: (_, response) => response.writeHead(200).end(tampered) }));
    await refused(`${origin}/releases/v1.2.3/`, "bad-checksum", new RegExp(`${release.metadata.bundle.name.replace(/\./g, "\\.")}: sha256 [0-9a-f]{64} but SHA256SUMS says ${release.metadata.bundle.sha256}`));
  });

  it("cuts off an oversized answer: a declared length above the bound, and a chunked body without one", async () => {
    const declared = await serve(releaseHandler());
    await refused(`${declared}/releases/v1.2.3`, "fetch-failed", /release v1\.2\.3 at http:\/\/127\.0\.0\.1:\d+: \/releases\/v1\.2\.3\/ats-node-.*\.tar\.gz is \d+ bytes, more than the 64 allowed/, { maxBundleBytes: 64 });
    // SHA256SUMS as an endless chunked stream: no Content-Length to refuse up front.
    const chunked = await serve(
      releaseHandler({
        SHA256SUMS: (_, response) => {
          response.writeHead(200);
          // Until the client goes away: the agent must be the one to stop.
          const more = (): void => {
            if (!response.destroyed) response.write(Buffer.alloc(16 * 1024, 0x61), () => setImmediate(more));
          };
          more();
        },
      }),
    );
    await refused(`${chunked}/releases/v1.2.3`, "fetch-failed", /\/releases\/v1\.2\.3\/SHA256SUMS exceeds 65536 bytes/);
  });

  it("refuses a redirect to another origin without contacting it", async () => {
    const elsewhere = await serve(releaseHandler());
    const origin = await serve(releaseHandler({ SHA256SUMS: (_, response) => response.writeHead(302, { Location: `${elsewhere}/releases/v1.2.3/SHA256SUMS` }).end() }));
    const refusal = await refused(`${origin}/releases/v1.2.3`, "fetch-failed", new RegExp(`GET /releases/v1\\.2\\.3/SHA256SUMS redirects \\(302\\) to another origin, ${elsewhere}; only ${origin} is contacted`));
    expect(refusal.evidence).to.deep.equal({ url: "/releases/v1.2.3/SHA256SUMS", status: 302 });
    expect(requests.get(elsewhere)).to.deep.equal([]);
  });

  it("cuts off a server that stalls, before its headers or in the middle of its body, at the deadline", async () => {
    const silent = await serve(() => undefined); // never answers
    let startedAt = Date.now();
    await refused(`${silent}/releases/v1.2.3`, "fetch-failed", /GET \/releases\/v1\.2\.3\/SHA256SUMS failed \(TimeoutError/, { downloadTimeoutMs: 300 });
    expect(Date.now() - startedAt).to.be.below(5_000);
    const trickle = await serve(
      releaseHandler({
        [release.metadata.bundle.name]: (_, response) => {
          response.writeHead(200, { "Content-Length": String(1024) });
          const drip = setInterval(() => response.write("x"), 50);
          response.on("close", () => clearInterval(drip));
        },
      }),
    );
    startedAt = Date.now();
    await refused(`${trickle}/releases/v1.2.3`, "fetch-failed", /reading \/releases\/v1\.2\.3\/ats-node-.*\.tar\.gz failed \(TimeoutError\)/, { downloadTimeoutMs: 300 });
    expect(Date.now() - startedAt).to.be.below(5_000);
  });

  it("ats-upgrade run refuses a plan whose release URL serves a tampered file before anything else; the plan takes a URL without query or credentials", async () => {
    const origin = await serve(releaseHandler({ "BUILD-METADATA.json": (_, response) => response.writeHead(200).end("{}") }));
    const planJson = {
      version: PLAN_VERSION,
      release: approved(`${origin}/releases/v1.2.3`),
      // Nothing below is read: the release is refused first.
      network: { manifest: join(root, "no-manifest.json"), trustedRpc: "http://127.0.0.1:9" },
      nodes: [{ host: "node-a", role: "primary", rest: "http://127.0.0.1:9", rpc: "http://127.0.0.1:9", installRoot: join(root, "installs"), unit: { kind: "local", dir: join(root, "unit") } }],
      rolloutOrder: ["node-a"],
      acceptance: { warmupMs: 0, timeoutMs: 1_000, maxLogErrors: 0 },
    };
    const receipt = await runUpgrade({ plan: parsePlan(planJson), planText: JSON.stringify(planJson) });
    expect(receipt.outcome).to.equal("refused");
    expect(receipt.refusal?.code).to.equal("bad-checksum");
    expect(receipt.refusal?.message).to.match(/BUILD-METADATA\.json: sha256 [0-9a-f]{12}… but SHA256SUMS says/);
    expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(["not-started"]);

    for (const url of [`${origin}/releases?tag=v1.2.3`, `${origin}/releases#v1.2.3`, "http://user:pass@127.0.0.1:1/releases", "ftp://127.0.0.1/releases"]) {
      expect(() => parsePlan({ ...planJson, release: { ...planJson.release, source: { url } } }), url).to.throw(UpgradeRefusal, /plan\/release\/source/);
    }
    expect(() => parsePlan({ ...planJson, release: { ...planJson.release, source: { url: origin, dir: root } } })).to.throw(UpgradeRefusal, /plan\/release\/source/);
  });
});
