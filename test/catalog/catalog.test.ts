/**
 * The catalog program (catalog/server.ts) on 127.0.0.1 and a free port, with temporary folders:
 * - downloads: the JSON index, a release's files with ETag, Content-Length and byte ranges, nothing else of the
 *   folder, and the upgrade agent fetching and verifying a release from it (and refusing a file changed on disk);
 * - the evidence gateway: every served identifier recomputed with multiformats from the bytes received, forced
 *   downloads, a 400 naming the rule for each identifier it does not serve, no upload route;
 * - the mesh's contradiction evidence published from a node's GET /mesh/state and checked by URL with
 *   `ats-node evidence check`;
 * - the faucet on a Hardhat chain, signed in by a viem wallet client as a user would.
 * Every server and chain is stopped in after()/afterEach(), also when a test fails.
 */
import { expect } from "chai";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { sha256 } from "multiformats/hashes/sha2";
import { createPublicClient, createWalletClient, http, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createSiweMessage } from "viem/siwe";
import { startCatalog, type CatalogServer } from "../../catalog/server";
import { loadCatalogConfig } from "../../catalog/settings";
import { runCli, type CliIo } from "../../node/cli";
import { MAX_SIGNING_DELAY_NS } from "../../protocol/constants";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS } from "../../protocol/devkeys";
import { contradictionEvidence, findContradictions } from "../../protocol/evidence";
import { nodeAddressFromPrivateKey } from "../../protocol/keys";
import { attest } from "../../protocol/sign";
import { UpgradeRefusal } from "../../upgrade/errors";
import { fetchVerifiedRelease } from "../../upgrade/fetchRelease";
import { buildRelease, type BuiltRelease } from "../../upgrade/release";
import { startChainProcess, stopChainProcess, type ChainProcess } from "../../scripts/chainProcess";
import type { MeshStateBody } from "../../wire/rest";
import { silentLogger, tempDir } from "../node/core/helpers";
import { fakeDist, rejection } from "../upgrade/helpers";

const REVISION = "0123456789abcdef0123456789abcdef01234567";
const HARDHAT_FUNDED_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"; // hardhat account #1

/** The CID of `bytes`, computed here with multiformats (not the code under test's helper). */
async function cidOf(bytes: Uint8Array): Promise<string> {
  return CID.create(1, raw.code, await sha256.digest(bytes)).toString();
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function captureIo(): CliIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, stdout: (line) => out.push(line), stderr: (line) => err.push(line), env: {}, cwd: process.cwd(), logger: () => silentLogger() };
}

/** A GET /mesh/state body (schema-valid) whose node holds one contradiction of dev node 0 (as test/node/cli.test.ts builds it). */
function meshStateWithContradiction(): MeshStateBody {
  const momentNs = 1_732_268_493_123_456_789n;
  const hourNs = 3_600_000_000_000n;
  const signed = (nanoMoment: bigint, nodeTimestampNs: bigint) => attest({ card: DEV_CARD_PRIVATE_KEY, nodes: [DEV_NODE_PRIVATE_KEYS[0]], nanoMoment, accuracy: 50, nodeTimestampNs });
  const earlier = signed(momentNs, momentNs);
  const later = signed(momentNs - MAX_SIGNING_DELAY_NS - hourNs, momentNs + hourNs);
  const [found] = findContradictions(earlier, later);
  const evidence = contradictionEvidence(found!, [earlier, later]) as unknown as MeshStateBody["contradictions"][number]["evidence"];
  return {
    convergenceState: "Converged",
    timeQuality: 9_000,
    peerCount: 1,
    members: 2,
    threshold: 2,
    consensusOffsetNs: "0",
    lastError: null,
    role: "primary",
    roundsSucceeded: 1,
    roundsFailed: {},
    peers: [],
    tamperAlerts: [],
    contradictions: [{ nodeId: nodeAddressFromPrivateKey(DEV_NODE_PRIVATE_KEYS[0]), foundAtNs: "1732268493123456789", contradictionsTotal: 1, excessNs: found!.excessNs.toString(), evidence: JSON.parse(JSON.stringify(evidence)) }],
    refused: { packets: {}, coSignRequests: 0, coSignRequestsByRule: {}, relayedProofs: {} },
  };
}

describe("catalog: downloads, evidence gateway and faucet", function () {
  this.timeout(120_000);
  const dir = tempDir("catalog");
  let release: BuiltRelease;
  let node: Server;
  let nodeUrl: string;
  let catalog: CatalogServer;

  before(async () => {
    const releasesDir = join(dir.path, "releases");
    mkdirSync(releasesDir);
    release = buildRelease({ distDir: fakeDist(dir.path, "1.2.3"), outDir: releasesDir, sourceRevision: REVISION, sourceTreeDirty: false, sourceDateEpochS: 1_700_000_000, buildTime: new Date("2026-01-02T03:04:05Z") });
    writeFileSync(join(release.dir, "notes.txt"), "not listed in SHA256SUMS");
    const body = JSON.stringify(meshStateWithContradiction());
    node = createServer((request, response) => {
      if (request.url !== "/mesh/state") return void response.writeHead(404).end();
      response.writeHead(200, { "content-type": "application/json" }).end(body);
    });
    nodeUrl = await listen(node);
    const config = loadCatalogConfig({ env: {}, overrides: { port: 0, releasesDir, contentDir: join(dir.path, "content"), evidenceNodeUrls: [nodeUrl], logLevel: "silent" } });
    catalog = await startCatalog(config, { log: silentLogger() });
  });
  after(async () => {
    await catalog?.close();
    node?.closeAllConnections();
    await new Promise((resolve) => node?.close(resolve));
    dir.remove();
  });

  const releasePath = () => `/releases/${release.metadata.release_id}`;

  it("lists the releases as JSON and serves a release's files with ETag, Content-Length and byte ranges", async () => {
    const index = (await (await fetch(`${catalog.url}/releases`)).json()) as { releases: { releaseId: string; files: { name: string; bytes: number; sha256: string | null }[] }[] };
    expect(index.releases.map((entry) => entry.releaseId)).to.deep.equal([release.metadata.release_id]);
    const names = index.releases[0]!.files.map((file) => file.name).sort();
    expect(names).to.deep.equal([release.metadata.bundle.name, "BUILD-METADATA.json", "SHA256SUMS"].sort());
    expect(index.releases[0]!.files.find((file) => file.name === release.metadata.bundle.name)!.sha256).to.equal(release.metadata.bundle.sha256);

    const url = `${catalog.url}${releasePath()}/${release.metadata.bundle.name}`;
    const whole = await fetch(url);
    const bytes = Buffer.from(await whole.arrayBuffer());
    expect(whole.status).to.equal(200);
    expect(whole.headers.get("content-length")).to.equal(String(bytes.length));
    expect(whole.headers.get("accept-ranges")).to.equal("bytes");
    const etag = whole.headers.get("etag");
    expect(etag).to.be.a("string");

    const part = await fetch(url, { headers: { range: "bytes=10-19" } });
    expect(part.status).to.equal(206);
    expect(part.headers.get("content-range")).to.equal(`bytes 10-19/${bytes.length}`);
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(10, 20))).to.equal(true);
    // fetch() adds "cache-control: no-cache" to a conditional request unless one is given (which would force a 200).
    expect((await fetch(url, { headers: { "if-none-match": etag!, "cache-control": "max-age=0" } })).status).to.equal(304);
    expect((await fetch(url, { headers: { range: `bytes=${bytes.length + 5}-` } })).status).to.equal(416);
  });

  it("serves nothing else: no listing, no unlisted file, no path out of a release", async () => {
    for (const path of [`${releasePath()}/`, `${releasePath()}/notes.txt`, "/releases/nope/SHA256SUMS", `${releasePath()}/..%2F..%2Fcontent`, "/releases/../package.json", "/releases/%2e%2e/SHA256SUMS"]) {
      const answer = await fetch(`${catalog.url}${path}`);
      expect(answer.status, path).to.equal(404);
      expect(((await answer.json()) as { message: string }).message, path).to.be.a("string");
    }
  });

  it("lets the upgrade agent fetch and verify a release by URL, and refuse it once a file changed on disk", async () => {
    const approved = { tag: "v1.2.3", release_id: release.metadata.release_id, source_revision: REVISION, artifact: { kind: "bundle" as const, sha256: release.metadata.bundle.sha256 }, source: { url: `${catalog.url}${releasePath()}` } };
    const verified = await fetchVerifiedRelease(approved);
    expect(verified.metadata.release_id).to.equal(release.metadata.release_id);
    verified.dispose();
    appendFileSync(join(release.dir, release.metadata.bundle.name), "tampered");
    const refusal = await rejection(fetchVerifiedRelease(approved), UpgradeRefusal, /./);
    expect(refusal.code).to.equal("bad-checksum");
  });

  it("serves published content by CIDv1 (raw, sha2-256) as a forced download, each CID matching the bytes received", async () => {
    await catalog.publishNow();
    const index = (await (await fetch(`${catalog.url}/evidence`)).json()) as { evidence: { cid: string; nodeId: string }[]; releases: Record<string, string> };
    const served = [...index.evidence.map((item) => item.cid), ...Object.values(index.releases)];
    expect(served.length).to.be.at.least(3);
    for (const cid of served) {
      const answer = await fetch(`${catalog.url}/ipfs/${cid}`);
      expect(answer.status, cid).to.equal(200);
      expect(await cidOf(new Uint8Array(await answer.arrayBuffer())), cid).to.equal(cid);
      expect(answer.headers.get("content-disposition")).to.equal(`attachment; filename="${cid}"`);
      expect(answer.headers.get("x-content-type-options")).to.equal("nosniff");
      expect(answer.headers.get("content-type")).to.equal("application/octet-stream");
    }
  });

  it("refuses every identifier it does not serve with a 400 naming the rule, and unknown content with a 404", async () => {
    const dagPb = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi";
    const v0 = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG";
    const { sha512 } = await import("multiformats/hashes/sha2");
    const sha512Cid = CID.create(1, raw.code, await sha512.digest(new Uint8Array([1]))).toString();
    for (const [cid, rule] of [[v0, "must be a CIDv1"], [dagPb, "must use the raw codec"], [sha512Cid, "must hash with sha2-256"], ["not-a-cid", "is not a CID"]] as const) {
      const answer = await fetch(`${catalog.url}/ipfs/${cid}`);
      expect(answer.status, cid).to.equal(400);
      expect(((await answer.json()) as { message: string }).message, cid).to.contain(rule);
    }
    const unknown = await cidOf(new TextEncoder().encode("never published"));
    expect((await fetch(`${catalog.url}/ipfs/${unknown}`)).status).to.equal(404);
    for (const method of ["PUT", "POST", "DELETE"]) expect((await fetch(`${catalog.url}/ipfs/${unknown}`, { method, body: method === "DELETE" ? null : "x" })).status, method).to.equal(404);
  });

  it("publishes the mesh's contradiction evidence, which `ats-node evidence check <url>` verifies, identifier included", async () => {
    const index = (await (await fetch(`${catalog.url}/evidence`)).json()) as { evidence: { cid: string; nodeId: string; reportedBy: string }[] };
    expect(index.evidence).to.have.length(1);
    expect(index.evidence[0]).to.include({ nodeId: nodeAddressFromPrivateKey(DEV_NODE_PRIVATE_KEYS[0]), reportedBy: nodeUrl });
    const io = captureIo();
    expect(await runCli(["evidence", "check", `${catalog.url}/ipfs/${index.evidence[0]!.cid}`], io)).to.equal(0);
    expect(io.out.join("\n")).to.contain("signed contradicting entries");

    // A gateway that serves other bytes under the identifier is caught: here, a server that lies.
    const liar = createServer((_request, response) => response.writeHead(200).end("{}"));
    const liarUrl = await listen(liar);
    try {
      const lied = captureIo();
      expect(await runCli(["evidence", "check", "--json", `${liarUrl}/ipfs/${index.evidence[0]!.cid}`], lied)).to.equal(2);
      expect((JSON.parse(lied.out.join("\n")) as { detail: string }).detail).to.contain(`are not the content ${index.evidence[0]!.cid}`);
    } finally {
      liar.close();
    }
  });

  describe("the faucet on a chain", () => {
    let chain: ChainProcess | undefined;
    let faucetCatalog: CatalogServer | undefined;
    before(async () => {
      chain = await startChainProcess(31_337);
      const config = loadCatalogConfig({
        env: {},
        overrides: { port: 0, contentDir: join(dir.path, "faucet-content"), faucetRpcUrl: chain.rpcUrl, faucetPrivateKey: HARDHAT_FUNDED_KEY, faucetAmountWei: "500000000000000000", logLevel: "silent" },
      });
      faucetCatalog = await startCatalog(config, { log: silentLogger() });
    });
    after(async () => {
      await faucetCatalog?.close();
      await stopChainProcess(chain);
    });

    it("funds a wallet that signs in with Ethereum, once; refuses the replay with 401", async () => {
      const user = createWalletClient({ account: privateKeyToAccount(generatePrivateKey()), transport: http(chain!.rpcUrl) });
      const terms = (await (await fetch(`${faucetCatalog!.url}/faucet/nonce`, { method: "POST" })).json()) as { nonce: string; expiresAt: string; chainId: number; domain: string; uri: string; statement: string };
      const message = createSiweMessage({ domain: terms.domain, address: user.account.address, statement: terms.statement, uri: terms.uri, version: "1", chainId: terms.chainId, nonce: terms.nonce, issuedAt: new Date(), expirationTime: new Date(terms.expiresAt) });
      const signature: Hex = await user.signMessage({ message });
      const claim = () => fetch(`${faucetCatalog!.url}/faucet/claim`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message, signature }) });
      const granted = await claim();
      const grant = (await granted.json()) as { txHash: Hex; address: string };
      expect(granted.status).to.equal(200);
      const publicClient = createPublicClient({ transport: http(chain!.rpcUrl) });
      const receipt = await publicClient.waitForTransactionReceipt({ hash: grant.txHash });
      expect(receipt.status).to.equal("success");
      expect(await publicClient.getBalance({ address: user.account.address })).to.equal(500_000_000_000_000_000n);

      const replay = await claim();
      expect(replay.status).to.equal(401);
      expect(((await replay.json()) as { message: string }).message).to.contain("already used");
      const malformed = await fetch(`${faucetCatalog!.url}/faucet/claim`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message }) });
      expect(malformed.status).to.equal(400);
    });
  });
});
