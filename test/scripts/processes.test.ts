/**
 * `npm start` runs every program as a process of its own (issue 31.2): scripts/start.ts as a child, left running;
 * its network file names each process and its endpoints.
 *
 * - The catalog's services (issue 30.6) are read from the network file and fetched as a user would: the releases
 *   index and a release file checked against its SHA256SUMS, the same file by content id from the evidence
 *   gateway, a wallet funded by the faucet after signing in, the explorer's page. `ats-node manifest verify` checks
 *   every listed service live, and fails naming each catalog service once the catalog's process is killed.
 * - One mesh member is killed (SIGKILL, a crash): the others keep serving proofs with consensus, co-signed by the
 *   survivors only, and report the dead member absent. Then `npm start` itself is SIGKILLed: every process it
 *   started, the chains and their supervisors included, stops on its own (bin/stopWithParent.js,
 *   scripts/superviseWithParent.js).
 * - On anvil with one node: the tour passes, a proof the relayer pushes on request verifies through the gateway
 *   (endpoints from the network file alone), and Ctrl-C (SIGINT) stops every process, marks the network file
 *   stopped and removes the manifest.
 *
 * The mesh of 4 on Hardhat is one `npm start` shared by the tests of its describe, in order; the anvil one another.
 * Processes are found in /proc (Linux): every descendant of the start process, by parent pid.
 */
import { expect } from "chai";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createPublicClient, createWalletClient, defineChain, http, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createSiweMessage } from "viem/siwe";
import { timeOracleAbi } from "../../abi";
import { contentIdOf } from "../../lib/contentId";
import { runCli } from "../../node/cli";
import type { NetworkFileJson } from "../../wire/network";
import { HARDHAT_DEV_KEYS, LOCAL_RELAYER_API_KEY } from "../../scripts/network";
import { parseManifest, type NetworkManifest } from "../../wire/manifest";
import { RunningStart, until } from "./runningStart";

/** The fields of /proc/<pid>/stat after the command's name ("state ppid …"), or undefined once it is gone. */
function statFields(pid: number | string): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses, so the fields are read after the last ")".
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** Whether `pid` runs: a zombie (exited, not yet reaped by whoever adopted it) does not. */
function alive(pid: number): boolean {
  const fields = statFields(pid);
  return fields !== undefined && fields[0] !== "Z";
}

/** Every process now running below `rootPid` (children, their children…), read from /proc. */
function descendants(rootPid: number): number[] {
  const childrenOf = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (fields === undefined) continue; // it exited meanwhile
    const parentPid = Number(fields[1]);
    childrenOf.set(parentPid, [...(childrenOf.get(parentPid) ?? []), Number(entry)]);
  }
  const found: number[] = [];
  const pending = [rootPid];
  while (pending.length > 0) {
    for (const child of childrenOf.get(pending.pop()!) ?? []) {
      found.push(child);
      pending.push(child);
    }
  }
  return found;
}

/** `ats-node manifest verify <the network's manifest>`, in this process. */
async function manifestVerify(start: RunningStart): Promise<{ code: number; report: { ok: boolean; services: Record<string, { url: string; ok: boolean; evidence?: string; error?: string }> }; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(["manifest", "verify", start.manifestFile], { stdout: (line) => out.push(line), stderr: (line) => err.push(line), env: {}, cwd: start.dir });
  return { code, report: JSON.parse(out.join("\n")) as never, err: err.join("\n") };
}

describe("npm start: every program a process of its own (scripts/start.ts)", function () {
  this.timeout(600_000);

  describe("a mesh of 4 on Hardhat", () => {
    let start: RunningStart;
    let network: NetworkFileJson;
    let manifest: NetworkManifest;
    /** The catalog's line in the network file: its pid and each service's URL. */
    let catalog: NonNullable<NetworkFileJson["programs"]>[number];

    before(async () => {
      start = new RunningStart();
      network = await start.started();
      manifest = parseManifest(JSON.parse(readFileSync(start.manifestFile, "utf8")));
      catalog = network.programs!.find((program) => program.name === "catalog")!;
    });

    after(() => start.cleanUp());

    it("lists every catalog service in the network file and the manifest, and each serves what it promises", async () => {
      expect(catalog.program).to.equal("ats-catalog");
      const { explorer, downloads, evidence, faucet } = catalog.endpoints as Record<string, string>;
      expect(Object.keys(catalog.endpoints)).to.deep.equal(["explorer", "downloads", "evidence", "faucet"]);
      for (const [name, url] of Object.entries(catalog.endpoints)) {
        expect(manifest.services[name], `manifest service ${name}`).to.equal(url);
        expect(start.stdout, `${name} printed`).to.include(`${name} ${url}`);
      }

      // Downloads: the network's own release, its metadata as SHA256SUMS lists it.
      const index = (await (await fetch(downloads!)).json()) as { releases: { releaseId: string; files: { name: string; path: string; sha256: string | null }[] }[] };
      const releaseId = /downloads serve release (\S+);/.exec(start.stdout)![1]!;
      const release = index.releases.find((entry) => entry.releaseId === releaseId);
      expect(release, `${releaseId} in the index`).to.not.equal(undefined);
      const metadataFile = release!.files.find((file) => file.name === "BUILD-METADATA.json")!;
      const metadataBytes = new Uint8Array(await (await fetch(new URL(metadataFile.path, downloads))).arrayBuffer());
      expect(createHash("sha256").update(metadataBytes).digest("hex")).to.equal(metadataFile.sha256);
      const sums = await (await fetch(new URL(release!.files.find((file) => file.name === "SHA256SUMS")!.path, downloads))).text();
      expect(sums).to.include(`${metadataFile.sha256}  BUILD-METADATA.json`);

      // Evidence: the same file by its content id (the catalog publishes its releases into the store), recomputed here.
      const published = (await (await fetch(new URL("/evidence", evidence))).json()) as { releases: Record<string, string> };
      const cid = published.releases[metadataFile.path]!;
      const byId = await fetch(`${evidence}${cid}`);
      expect(byId.headers.get("content-disposition")).to.equal(`attachment; filename="${cid}"`);
      expect(contentIdOf(new Uint8Array(await byId.arrayBuffer()))).to.equal(cid);

      // Faucet: a fresh wallet signs in (EIP-4361) and receives the grant on alpha, paid from Hardhat account #3.
      const alpha = network.chains[0]!;
      const chain = defineChain({ id: alpha.chainId, name: alpha.name, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [alpha.rpcUrl] } } });
      const wallet = createWalletClient({ account: privateKeyToAccount(generatePrivateKey()), chain, transport: http(alpha.rpcUrl) });
      const issued = (await (await fetch(`${faucet}/nonce`, { method: "POST" })).json()) as { nonce: string; expiresAt: string; domain: string; uri: string; statement: string; chainId: number; amountWei: string };
      expect(issued.chainId).to.equal(alpha.chainId);
      const message = createSiweMessage({ ...issued, address: wallet.account.address, version: "1", expirationTime: new Date(issued.expiresAt) });
      const claim = await fetch(`${faucet}/claim`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message, signature: await wallet.signMessage({ message }) }) });
      const grant = (await claim.json()) as { address: Address; amountWei: string; txHash: Hex };
      expect(claim.status, JSON.stringify(grant)).to.equal(200);
      const publicClient = createPublicClient({ chain, transport: http(alpha.rpcUrl) });
      const receipt = await publicClient.waitForTransactionReceipt({ hash: grant.txHash });
      expect(receipt.from.toLowerCase()).to.equal(privateKeyToAccount(HARDHAT_DEV_KEYS.faucet).address.toLowerCase());
      expect(await publicClient.getBalance({ address: wallet.account.address })).to.equal(BigInt(issued.amountWei));

      // Explorer: the page, configured with this network's chain, gateway, nodes and relayer.
      const page = await fetch(explorer!);
      expect(page.headers.get("content-type")).to.match(/^text\/html/);
      const config = (await (await fetch(`${explorer}config.json`)).json()) as { chain: { chainId: number }; gateway: string; nodes: string[]; relayer: string };
      expect(config).to.deep.include({ chain: { name: "alpha", chainId: 31337 }, gateway: network.temporalRpc![0], nodes: network.nodes, relayer: network.programs!.find((program) => program.name === "relayer")!.endpoints.api });
    });

    it("ats-node manifest verify checks every listed service live and reports each ok with its evidence", async () => {
      const { code, report, err } = await manifestVerify(start);
      expect(code, err).to.equal(0);
      expect(report.ok).to.equal(true);
      expect(Object.keys(report.services)).to.deep.equal(Object.keys(manifest.services));
      for (const [name, verdict] of Object.entries(report.services)) expect(verdict, name).to.deep.include({ url: manifest.services[name], ok: true });
      expect(report.services.downloads!.evidence).to.match(/^releases index lists \d+, newest ats-node-/);
      expect(report.services.evidence!.evidence).to.match(/^404 for an unpublished CID, 400 for a malformed one/);
      expect(report.services.faucet!.evidence).to.match(/^funds chain 31337, \d+ wei per sign-in/);
      expect(report.services.explorer!.evidence).to.equal("page text/html, config.json shows chain 31337");
      expect(report.services["time-host"]!.evidence).to.match(/^NTPv4 server reply, stratum \d+/);
      expect(report.services["node-1-grpc"]!.evidence).to.match(/^gRPC server \(grpc-status \d+/);
      expect(report.services["node-1-ws"]!.evidence).to.equal("WebSocket handshake completed");
    });

    it("keeps serving proofs with consensus after one member's process is killed and reports it absent; a SIGKILLed npm start leaves no process behind", async () => {
      const { stdout } = start;
      expect(network.status).to.equal("running");
      const programs = network.programs!;
      expect(programs.map((program) => program.name)).to.deep.equal(["chain alpha", "chain beta", "node 1", "node 2", "node 3", "node 4", "gateway", "relayer", "catalog"]);
      expect(new Set(programs.map((program) => program.pid)).size, "one process each").to.equal(programs.length);
      for (const program of programs) expect(stdout, program.name).to.include(`${program.program} (pid ${program.pid}):`);
      const nodes = programs.filter((program) => program.program === "ats-node");
      for (const node of nodes) expect(Object.keys(node.endpoints)).to.include.members(["rest", "metrics", "ws", "grpc", "ntp", "mesh"]);
      expect(manifest.chain.evmChainId).to.equal(31337);
      expect(manifest.chain.ntsVerified).to.equal(false);
      expect(manifest.meshPeers).to.have.length(4);
      const gateway = programs.find((program) => program.name === "gateway")!;
      expect(manifest.services.time).to.equal(gateway.endpoints.rpc);
      expect(manifest.services["time-ws"]).to.equal(gateway.endpoints.ws);
      expect(manifest.services["time-host"]).to.equal(nodes[0]!.endpoints.ntp);
      expect(manifest.services["node-1-grpc"]).to.equal(`http://${nodes[0]!.endpoints.grpc}`);
      expect(manifest.services["node-4-ws"]).to.equal(nodes[3]!.endpoints.ws);

      // A crash of node 2's process.
      const victim = nodes[1]!;
      const victimId = manifest.meshPeers.find((peer) => peer.endpoint === victim.endpoints.rest)!.nodeId;
      process.kill(victim.pid, "SIGKILL");
      await until(() => (alive(victim.pid) ? undefined : true), "node 2's death", 10_000);

      // Node 1 reports it absent, and the three others keep serving co-signed proofs without it.
      const rest = nodes[0]!.endpoints.rest;
      await until(async () => {
        const state = (await (await fetch(`${rest}/mesh/state`)).json()) as { peers: { nodeId: string; absent: boolean }[] };
        return state.peers.find((peer) => peer.nodeId === victimId)?.absent === true ? true : undefined;
      }, "node 2 reported absent", 60_000);
      const survivors = manifest.meshPeers.filter((peer) => peer.nodeId !== victimId).map((peer) => peer.nodeId.toLowerCase());
      const served = await until(async () => {
        const response = await fetch(`${rest}/time/current`);
        if (response.status !== 200) return undefined;
        return (await response.json()) as { consensus: { members: number; responders: number; readings: { nodeId: string }[] } };
      }, "a proof after the crash", 60_000);
      expect(served.consensus.members).to.equal(4);
      expect(served.consensus.responders).to.be.at.least(3);
      for (const reading of served.consensus.readings) expect(survivors).to.include(reading.nodeId.toLowerCase());

      // npm start dies (SIGKILL): every process below it, the chains' included, stops on its own.
      const tree = descendants(start.child.pid!);
      for (const program of programs.filter((program) => program !== victim)) expect(tree, `${program.name} runs below npm start`).to.include(program.pid);
      for (const chain of programs.filter((program) => program.name.startsWith("chain "))) expect(descendants(chain.pid), `${chain.name} runs under its supervisor`).to.have.length(1);
      await start.stop("SIGKILL");
      const left = await until(() => {
        const running = tree.filter(alive);
        return running.length === 0 ? running : undefined;
      }, `the end of every process npm start started (${tree.join(", ")})`, 30_000).catch(() => tree.filter(alive));
      expect(left, "processes left running after npm start was SIGKILLed").to.deep.equal([]);
    });
  });

  describe("one node on anvil", () => {
    let start: RunningStart | undefined;
    let network: NetworkFileJson;
    before(async () => {
      start = new RunningStart(["--nodes", "1", "--chain", "anvil"]);
      network = await start.started();
    });
    after(() => start?.cleanUp());

    it("ats-node manifest verify fails, naming each catalog service, once the catalog's process is killed", async () => {
      const catalog = start!.network().programs!.find((program) => program.name === "catalog")!;
      process.kill(catalog.pid, "SIGKILL");
      await until(() => (alive(catalog.pid) ? undefined : true), "the catalog's death", 10_000);
      const { code, report, err } = await manifestVerify(start!);
      expect(code).to.equal(1);
      expect(report.ok).to.equal(false);
      for (const [name, url] of Object.entries(catalog.endpoints)) {
        expect(report.services[name], name).to.deep.include({ url, ok: false });
        // The whole report as the message: chai shortens the string it matched.
        expect(err, err).to.match(new RegExp(`service ${name} \\(${url.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}\\) failed: .*ECONNREFUSED`));
      }
      expect(err).to.include("4 of");
      expect(err).to.match(/services failed: explorer, downloads, evidence, faucet$/);
      // The rest of the network is unaffected.
      expect(report.services["node-1"]!.ok).to.equal(true);
      expect(report.services.time!.ok).to.equal(true);
    });

    it("on anvil: the tour passes, a proof pushed by the relayer verifies through the gateway (endpoints from the network file), and Ctrl-C stops every process, marks the network file stopped and removes the manifest", async () => {
      const running = start!;
      expect(network.programs!.map((program) => `${program.name}: ${program.program}`)).to.deep.equal(["chain alpha: anvil", "chain beta: anvil", "node 1: ats-node", "gateway: ats-gateway", "relayer: ats-relayer", "catalog: ats-catalog"]);
      // The tour, as on Hardhat (test/scripts/start.test.ts): a proof verified on-chain, a call executed, a message bridged.
      expect(running.stdout).to.match(/alpha oracle verifyTimeProof: true/);
      expect(running.stdout).to.match(/status Executed: executed by 0x/);
      expect(running.stdout).to.match(/beta bridge: delivered in block \d+/);

      // From the network file alone: the relayer pushes a fresh proof to alpha on request…
      const endpoint = (name: string, key: string): string => network.programs!.find((program) => program.name === name)!.endpoints[key]!;
      const alpha = network.chains[0]!;
      const askedNs = BigInt(Date.now()) * 1_000_000n;
      const asked = await fetch(`${endpoint("relayer", "api")}/push/${alpha.chainId}`, { method: "POST", headers: { "x-api-key": LOCAL_RELAYER_API_KEY } });
      expect(asked.status).to.equal(202);
      const pushed = await until(async () => {
        const { items } = (await (await fetch(`${endpoint("relayer", "api")}/items?kind=push&chainId=${alpha.chainId}&limit=500`)).json()) as { items: { id: string; status: string; outcome: string | null }[] };
        const forced = items.find((item) => item.id.endsWith(":forced"));
        return forced !== undefined && forced.status !== "pending" && forced.status !== "submitted" ? forced : undefined;
      }, "the forced push", 60_000);
      expect(pushed.status, String(pushed.outcome)).to.equal("done");
      expect(pushed.outcome).to.match(/^pushed in block \d+ by 0x[0-9a-f]{64}$/);
      // …and alpha's oracle, read through the gateway (its eth_call goes to anvil), holds it and verifies it.
      const gateway = createPublicClient({ transport: http(endpoint("gateway", "rpc")) });
      const stored = await gateway.readContract({ address: alpha.oracle as Hex, abi: timeOracleAbi, functionName: "getCurrentTime" });
      expect(stored.nanoMoment >= askedNs - 2_000_000_000n, `a proof of the push's time, not the tour's (${stored.nanoMoment} vs asked at ${askedNs})`).to.equal(true);
      expect(await gateway.readContract({ address: alpha.oracle as Hex, abi: timeOracleAbi, functionName: "verifyTimeProof", args: [stored] })).to.equal(true);
      const answer = await fetch(endpoint("gateway", "rpc"), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "temporal_getConsensusTime" }) });
      const consensus = ((await answer.json()) as { result: { consensusTimeNs: string } }).result;
      expect(BigInt(consensus.consensusTimeNs) >= stored.nanoMoment, "the gateway's consensus time is past the stored proof").to.equal(true);

      const tree = descendants(running.child.pid!);
      expect(await running.stop("SIGINT"), running.stderr.slice(-3_000)).to.equal(0);
      expect(tree.filter(alive), "processes left running after Ctrl-C").to.deep.equal([]);
      expect((JSON.parse(readFileSync(running.networkFile, "utf8")) as NetworkFileJson).status).to.equal("stopped");
      expect(existsSync(running.manifestFile)).to.equal(false);
    });
  });
});
