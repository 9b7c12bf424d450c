/**
 * `npm run bench:node -- --pkcs11`: signatures through a PKCS#11 token (SoftHSM2 in a temporary token folder: the
 * machine's tokens are untouched) and what a token's pace does to the attestation tick.
 *
 * - Token signatures per second for each curve: the bare CKM_ECDSA call (Pkcs11Token.signDigest), and the whole
 *   signer the node uses (node/keysource/tokenKeys.ts: the card's SHA-256 + low-S; the node's low-S + recovery id by
 *   trial, one or two secp256k1 recoveries).
 * - An attestor on the token keys (ticks every 1 ms, signing on the serving thread, as a token key always does)
 *   for BENCH_PKCS11_RUN_S seconds (default 5), as SoftHSM2 signs and with each card signature slowed to 2 and 10
 *   ms by a busy wait (a network HSM's round trip blocks the same way: C_Sign is synchronous). Reported: attestations
 *   per second, the mean tick period, and the age of the cached proof (node clock − nanoMoment) sampled every 1 ms
 *   by a timer, as a request would find it. Ticks never overlap and never burst (node/core/fixedRate.ts): the period
 *   becomes max(interval, signing time + the 1 ms timer granularity), and the proof age stays within about one period
 *   plus one signing time instead of growing.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { signDigestCompact } from "../protocol/sign";
import { DevTimeCard } from "../node/card/dev";
import { Attestor } from "../node/core/attestor";
import { closeSharedTokens, sharedToken } from "../node/keysource/pkcs11";
import { tokenCardKey, tokenNodeKey, type CardKey } from "../node/keysource/tokenKeys";
import { fmt, percentile } from "./benchUtil";
import { SOFTHSM2_MODULE } from "./test-system";

type Row = [string, string, string];

const RUN_S = Number(process.env.BENCH_PKCS11_RUN_S ?? 5);
const TICK_INTERVAL_NS = 1_000_000n;
const TOKEN_LABEL = "ats-bench";
const PIN = "bench-pin";

/** Calls per second of `fn` over about `seconds` (after 50 warm-up calls). */
function perSecond(seconds: number, fn: () => void): number {
  for (let index = 0; index < 50; index += 1) fn();
  const startedNs = process.hrtime.bigint();
  const endNs = startedNs + BigInt(Math.round(seconds * 1e9));
  let calls = 0;
  let nowNs = startedNs;
  while (nowNs < endNs) {
    fn();
    calls += 1;
    nowNs = process.hrtime.bigint();
  }
  return calls / (Number(nowNs - startedNs) / 1e9);
}

/** Blocks this thread for `ms`: what a synchronous C_Sign to a slower (network) HSM does to the event loop. */
function busyWaitMs(ms: number): void {
  const endNs = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  while (process.hrtime.bigint() < endNs) {
    // spin
  }
}

/** The card key, each signature slowed by `extraMs`. */
function slowed(key: CardKey, extraMs: number): CardKey {
  if (extraMs === 0) return key;
  return {
    cardId: key.cardId,
    publicKey: key.publicKey,
    signHardware: (nanoMoment) => {
      busyWaitMs(extraMs);
      return key.signHardware(nanoMoment);
    },
  };
}

/** Runs an attestor on the token keys for RUN_S s; its rate, mean tick period and the sampled proof ages. */
async function attestorRun(cardKey: CardKey, nodeKey: ReturnType<typeof tokenNodeKey>, chainPem: string[]): Promise<{ perSecond: number; periodMs: number; ageMs: number[] }> {
  const card = new DevTimeCard({ cardKey, certificateChainPem: chainPem });
  const nodeClockNs = () => card.readTimeNs();
  const attestor = new Attestor({
    card,
    nodeKey,
    accuracyNs: 1_000_000,
    signingErrorBoundNs: 1_000_000,
    tickIntervalNs: TICK_INTERVAL_NS,
    maxServeAgeNs: 60_000_000_000n,
    nodeClockNs,
    logger: pino({ level: "silent" }),
  });
  const ageMs: number[] = [];
  attestor.start();
  const sampler = setInterval(() => {
    const latest = attestor.latest;
    if (latest !== null) ageMs.push(Number(nodeClockNs() - latest.proof.nanoMoment) / 1e6);
  }, 1);
  const before = attestor.stats().attestationsTotal;
  const startedNs = process.hrtime.bigint();
  await new Promise((resolve) => setTimeout(resolve, RUN_S * 1000));
  const attestations = attestor.stats().attestationsTotal - before;
  const elapsedS = Number(process.hrtime.bigint() - startedNs) / 1e9;
  clearInterval(sampler);
  if (attestor.stats().signer !== "main-thread") throw new Error("a token node key must sign on the serving thread");
  attestor.stop();
  card.close();
  return { perSecond: attestations / elapsedS, periodMs: (elapsedS * 1000) / attestations, ageMs };
}

/** The token rows, or one row saying why there are none (SoftHSM2 missing). */
export async function pkcs11BenchRows(): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), "ats-bench-pkcs11-"));
  const previousConf = process.env.SOFTHSM2_CONF;
  try {
    const conf = join(dir, "softhsm2.conf");
    mkdirSync(join(dir, "tokens"), { mode: 0o700 });
    writeFileSync(conf, `directories.tokendir = ${join(dir, "tokens")}\nobjectstore.backend = file\nlog.level = ERROR\n`);
    process.env.SOFTHSM2_CONF = conf; // read by the module when it is loaded (C_Initialize), in this process
    try {
      execFileSync("softhsm2-util", ["--init-token", "--free", "--label", TOKEN_LABEL, "--pin", PIN, "--so-pin", "bench-so-pin"], { stdio: "ignore" });
    } catch (error) {
      return [["PKCS#11 token (SoftHSM2)", `not measured: softhsm2-util failed (${(error as Error).message.slice(0, 80)}); apt-get install -y softhsm2`, ""]];
    }
    const token = sharedToken({ modulePath: SOFTHSM2_MODULE, slotId: null, tokenLabel: TOKEN_LABEL, pin: PIN });
    const cardPair = token.generateKeyPair("bench-card", "P-256");
    const nodePair = token.generateKeyPair("bench-node", "secp256k1");
    const cardKey = tokenCardKey(token, cardPair);
    const nodeKey = tokenNodeKey(token, nodePair);
    const digest = createHash("sha256").update("bench").digest();
    const rows: Row[] = [];
    const seconds = Math.min(RUN_S, 3);
    const rawP256 = perSecond(seconds, () => token.signDigest(cardPair, digest));
    const rawK1 = perSecond(seconds, () => token.signDigest(nodePair, digest));
    let moment = 1_700_000_000_000_000_000n;
    const cardSigner = perSecond(seconds, () => cardKey.signHardware((moment += 1n)));
    const nodeSigner = perSecond(seconds, () => signDigestCompact(nodeKey, digest));
    rows.push(["PKCS#11 token (SoftHSM2): P-256 CKM_ECDSA over a digest, one session", `${fmt(rawP256)} signatures/s`, ""]);
    rows.push(["PKCS#11 token (SoftHSM2): secp256k1 CKM_ECDSA over a digest, one session", `${fmt(rawK1)} signatures/s`, ""]);
    rows.push(["Card signer on the token (SHA-256 of the hardware message, token, low-S)", `${fmt(cardSigner)} signatures/s`, ""]);
    rows.push(["Node signer on the token (EIP-712 digest, token, low-S, recovery id by trial)", `${fmt(nodeSigner)} signatures/s`, ""]);
    for (const extraMs of [0, 2, 10]) {
      const run = await attestorRun(slowed(cardKey, extraMs), nodeKey, []);
      const ages = [...run.ageMs].sort((x, y) => x - y);
      const label = extraMs === 0 ? "as SoftHSM2 signs" : `each card signature slowed by ${extraMs} ms`;
      rows.push([
        `Attestor on the token keys, 1 ms tick, serving thread, ${label}: attestations/s, mean tick period; proof age sampled every 1 ms p50 / p99 / max`,
        `${fmt(run.perSecond)}/s, ${fmt(run.periodMs, 2)} ms; ${fmt(percentile(ages, 50), 2)} / ${fmt(percentile(ages, 99), 2)} / ${fmt(ages.at(-1) ?? Number.NaN, 2)} ms`,
        "period ≈ max(1 ms, signing time + ~1 ms); proof age bounded, not growing over the run",
      ]);
    }
    return rows;
  } finally {
    closeSharedTokens();
    if (previousConf === undefined) delete process.env.SOFTHSM2_CONF;
    else process.env.SOFTHSM2_CONF = previousConf;
    rmSync(dir, { recursive: true, force: true });
  }
}
