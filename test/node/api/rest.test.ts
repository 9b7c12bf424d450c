import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../../protocol/constants";
import { expect } from "chai";
import { parseJsonLossless, proofFromJson, proofToJson } from "../../../protocol/json";
import { createDevIdentity } from "../../../protocol/devca";
import { attest } from "../../../protocol/sign";
import { verifyTimeProof, createVerifyContext } from "../../../protocol/verify";
import type { ProofJson } from "../../../protocol/types";
import { Value } from "@sinclair/typebox/value";
import { buildRestApp } from "../../../node/api/rest";
import { NodeInfoBody } from "../../../wire/rest";
import { createTransportContext } from "../../../node/api/context";
import { DROP_REASONS } from "../../../node/api/connectionGuard";
import { OMITTED_DEFAULT_METRICS } from "../../../node/api/metrics";
import { http, startTestNode, testLogger, type TestNode } from "./helpers";

function nowNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

describe("node/api/rest", function () {
  let t: TestNode;
  let base: string;

  before(async function () {
    t = await startTestNode();
    base = t.node.endpoints.rest;
  });
  after(async function () {
    await t?.close();
  });

  async function current(): Promise<ProofJson> {
    const response = await http(base, "GET", "/time/current");
    expect(response.status).to.equal(200);
    return response.json as ProofJson;
  }

  describe("GET /time/current", function () {
    it("answers docs/protocol.md §9.1 exactly, a proof that verifies off-chain", async function () {
      const response = await http(base, "GET", "/time/current");
      expect(response.status).to.equal(200);
      expect(response.headers.get("content-type")).to.match(/^application\/json/);
      expect(response.headers.get("cache-control")).to.equal("no-store");
      const body = response.json as ProofJson;
      expect(Object.keys(body)).to.deep.equal(["nanoMoment", "proof"]);
      expect(Object.keys(body.proof)).to.have.members(["hardwareSignature", "nodeSignature", "accuracyNs", "hardwareId", "gps"]);
      expect(body.nanoMoment).to.match(/^[1-9][0-9]*$/);
      expect(body.proof.hardwareSignature).to.match(/^0x[0-9a-f]{192}$/);
      expect(body.proof.nodeSignature).to.match(/^0x[0-9a-f]{160}$/);
      expect(body.proof.accuracyNs).to.equal(DEV_CARD_DRIVER_ACCURACY_NS);
      expect(body.proof.hardwareId).to.equal(t.identity.cardId);
      // The dev card has no receiver and says so (unsigned metadata, docs/protocol.md §14.7).
      expect(body.proof.gps).to.include({ fixState: "simulated", satellites: 0, ppsOffsetNs: 0 });
      expect(BigInt(body.proof.gps!.observedAtNs) >= BigInt(body.nanoMoment)).to.equal(true);
      const { proof } = proofFromJson(parseJsonLossless(response.text));
      const context = createVerifyContext({
        cards: { [t.identity.cardId]: { publicKey: t.identity.cardPublicKey, revoked: false } },
        nodes: [t.identity.nodeAddress],
        nowNs: nowNs(),
      });
      expect(verifyTimeProof(proof, context)).to.deep.include({ valid: true });
    });

    it("serves the service's pre-serialised body byte for byte", async function () {
      // The body in flight is one of the recent cached attestations: the text equals some SignedTime.body.
      const seen = new Set<string>();
      const off = t.service.onProof((signed) => seen.add(signed.body));
      try {
        seen.add(t.service.current().body);
        const response = await http(base, "GET", "/time/current");
        seen.add(t.service.current().body);
        expect(seen.has(response.text)).to.equal(true);
      } finally {
        off();
      }
    });
  });

  describe("POST /time/verify", function () {
    it("answers valid for a fresh proof of this node", async function () {
      const proof = await current();
      const response = await http(base, "POST", "/time/verify", { body: JSON.stringify(proof) });
      expect(response.status).to.equal(200);
      expect(response.json).to.deep.equal({ valid: true, reason: null });
    });

    it("answers valid:false with the reason for a bogus proof, not 500", async function () {
      const proof = await current();
      const flipped = proof.proof.hardwareSignature.slice(0, -2) + (proof.proof.hardwareSignature.endsWith("00") ? "01" : "00");
      const cases: Array<[ProofJson, string]> = [
        [{ ...proof, proof: { ...proof.proof, hardwareSignature: flipped as ProofJson["proof"]["hardwareSignature"] } }, "bad-hardware-signature"],
        [{ ...proof, proof: { ...proof.proof, hardwareSignature: "0x1234", hardwareId: "0x1234" } as ProofJson["proof"] }, "hardware-signature-length"],
        [{ ...proof, proof: { ...proof.proof, nodeSignature: "0x" } }, "node-signature-length"],
        [{ ...proof, nanoMoment: "1" }, "bad-hardware-signature"],
        [{ ...proof, proof: { ...proof.proof, accuracyNs: 5_000 } }, ""],
      ];
      for (const [body, reason] of cases) {
        const response = await http(base, "POST", "/time/verify", { body: JSON.stringify(body) });
        expect(response.status, JSON.stringify(response.json)).to.equal(200);
        const answer = response.json as { valid: boolean; reason: string; detail: string };
        expect(answer.valid).to.equal(false);
        if (reason !== "") expect(answer.reason).to.equal(reason);
        expect(answer.detail).to.be.a("string");
      }
    });

    it("checks a foreign card's certificate chain against the trusted roots when the body carries one", async function () {
      const foreign = await createDevIdentity({ ca: t.identity.ca });
      const nanoMoment = t.card.readTimeNs();
      const proof = attest({ card: foreign.cardKey, nodes: [t.identity.nodeKey], nanoMoment, accuracy: 50, nodeTimestampNs: nanoMoment + 5n });
      const json = proofToJson(proof);
      const unknown = await http(base, "POST", "/time/verify", { body: JSON.stringify(json) });
      expect(unknown.json).to.include({ valid: false, reason: "unknown-card" });
      const chained = await http(base, "POST", "/time/verify", { body: JSON.stringify({ ...json, certificateChainPem: foreign.certificateChainPem }) });
      expect(chained.status, chained.text).to.equal(200);
      expect(chained.json).to.deep.equal({ valid: true, reason: null });
      const untrusted = await createDevIdentity();
      const wrongChain = await http(base, "POST", "/time/verify", { body: JSON.stringify({ ...json, certificateChainPem: untrusted.certificateChainPem }) });
      expect(wrongChain.json).to.include({ valid: false, reason: "certificate-chain-invalid" });
    });

    it("rejects a number where a decimal string is due, even above 2^53 (parsed losslessly, never rounded)", async function () {
      const proof = await current();
      const text = JSON.stringify(proof).replace(`"nanoMoment":"${proof.nanoMoment}"`, `"nanoMoment":${proof.nanoMoment}`);
      const response = await http(base, "POST", "/time/verify", { body: text });
      expect(response.status).to.equal(400);
      expect((response.json as { message: string }).message).to.match(/nanoMoment/);
    });

    it("rejects wrong types, unknown fields, bad ns and malformed JSON with 400 and a clear message", async function () {
      const proof = await current();
      const bad: Array<[string, RegExp]> = [
        ["{not json", /malformed JSON/],
        ["", /JSON/],
        [JSON.stringify({ ...proof, extra: 1 }), /additional/],
        [JSON.stringify({ ...proof, proof: { ...proof.proof, extra: 1 } }), /additional/],
        [JSON.stringify({ ...proof, proof: { ...proof.proof, accuracyNs: "50" } }), /accuracyNs/],
        [JSON.stringify({ ...proof, proof: { ...proof.proof, accuracyNs: 50.5 } }), /accuracyNs/],
        [JSON.stringify({ ...proof, nanoMoment: "-1" }), /nanoMoment/],
        [JSON.stringify({ ...proof, nanoMoment: "1.5" }), /nanoMoment/],
        [JSON.stringify({ ...proof, nanoMoment: "0x10" }), /nanoMoment/],
        [JSON.stringify({ ...proof, nanoMoment: "1e9" }), /nanoMoment/],
        [JSON.stringify({ ...proof, nanoMoment: "01" }), /nanoMoment/],
        [JSON.stringify({ ...proof, proof: { ...proof.proof, hardwareSignature: "0xZZ" } }), /hardwareSignature/],
        [JSON.stringify({ ...proof, proof: { ...proof.proof, hardwareSignature: proof.proof.hardwareSignature.toUpperCase() } }), /hardwareSignature/],
        [JSON.stringify({ nanoMoment: proof.nanoMoment }), /proof/],
        [JSON.stringify([proof]), /object/],
      ];
      for (const [body, message] of bad) {
        const response = await http(base, "POST", "/time/verify", { body });
        expect(response.status, body).to.equal(400);
        expect((response.json as { message: string }).message, body).to.match(message);
      }
    });

    it("refuses an oversized body with 413 and other media types with 415", async function () {
      const big = JSON.stringify({ nanoMoment: "1", proof: { pad: "x".repeat(t.config.bodyLimitBytes + 10) } });
      const tooLarge = await http(base, "POST", "/time/verify", { body: big });
      expect(tooLarge.status).to.equal(413);
      const wrongType = await fetch(`${base}/time/verify`, { method: "POST", body: "x", headers: { "content-type": "text/plain" } });
      expect(wrongType.status).to.equal(415);
      expect((await current()).nanoMoment).to.be.a("string"); // still serving
    });

    it("answers 415 to JSON declared in another charset than UTF-8, and takes utf-8 in any case, quoted or not", async function () {
      const body = JSON.stringify(await current());
      const post = (contentType: string) => http(base, "POST", "/time/verify", { body, headers: { "content-type": contentType } });
      for (const contentType of [
        "application/json; charset=utf-16",
        "application/json; charset=ISO-8859-1",
        'application/json; charset="utf-16le"',
        "application/json; charset=utf-8; charset=utf-16",
      ]) {
        const response = await post(contentType);
        expect(response.status, contentType).to.equal(415);
        expect(response.json, contentType).to.include({ statusCode: 415, error: "Unsupported Media Type" });
        expect((response.json as { message: string }).message, contentType).to.match(/charset .*UTF-8/);
      }
      for (const contentType of ["application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8", 'application/json; charset="utf-8"']) {
        expect((await post(contentType)).status, contentType).to.equal(200);
      }
    });

    it("refuses JSON nested deeper than 32 levels with 400 naming the bound (not the engine's stack overflow)", async function () {
      // 10,000 levels fit the body limit unclosed; before the bound the parser recursed until the stack overflowed.
      for (const body of ["[".repeat(10_000), `{"nanoMoment":${"[".repeat(32)}${"]".repeat(32)}}`]) {
        const response = await http(base, "POST", "/time/verify", { body });
        expect(response.status, body.slice(0, 40)).to.equal(400);
        expect(response.json).to.include({ message: "body: nesting deeper than 32 levels" });
      }
      // 32 levels are parsed (the schema then refuses the shape); brackets inside strings do not count.
      for (const body of ["[".repeat(32) + "]".repeat(32), JSON.stringify({ nanoMoment: "[".repeat(100) })]) {
        const response = await http(base, "POST", "/time/verify", { body });
        expect(response.status).to.equal(400);
        expect((response.json as { message: string }).message).not.to.contain("nesting");
      }
    });
  });

  describe("schedules", function () {
    it("creates a schedule (201), reads it back, and 404s an unknown id", async function () {
      const executeAt = (nowNs() + 3_600_000_000_000n).toString();
      const created = await http(base, "POST", "/time/schedule", {
        body: JSON.stringify({ executeAt, callback: "http://127.0.0.1:9/hook" }),
      });
      expect(created.status, created.text).to.equal(201);
      const record = created.json as { id: string; status: string; executeAt: string; callback: string };
      expect(record).to.include({ status: "scheduled", executeAt });
      expect(record.callback).to.equal("http://127.0.0.1:9/hook");
      const read = await http(base, "GET", `/time/schedule/${record.id}`);
      expect(read.status).to.equal(200);
      expect(read.json).to.include({ id: record.id, status: "scheduled", executeAt, attempts: 0, proof: null });
      const missing = await http(base, "GET", "/time/schedule/00000000-0000-4000-8000-000000000000");
      expect(missing.status).to.equal(404);
      expect(missing.json).to.include({ statusCode: 404, error: "Not Found" });
    });

    it("rejects bad schedules with 400 and leaves stored schedules untouched", async function () {
      const executeAt = (nowNs() + 3_600_000_000_000n).toString();
      const created = await http(base, "POST", "/time/schedule", { body: JSON.stringify({ executeAt, callback: "http://127.0.0.1:9/a" }) });
      const id = (created.json as { id: string }).id;
      const before = await http(base, "GET", `/time/schedule/${id}`);
      const bad = [
        JSON.stringify({ executeAt: Number(executeAt), callback: "http://127.0.0.1:9/a" }),
        JSON.stringify({ executeAt: "-5", callback: "http://127.0.0.1:9/a" }),
        JSON.stringify({ executeAt, callback: "ftp://127.0.0.1/a" }),
        JSON.stringify({ executeAt, callback: "http://127.0.0.1:9/a", id }),
        JSON.stringify({ executeAt }),
        "{\"executeAt\":",
      ];
      for (const body of bad) {
        const response = await http(base, "POST", "/time/schedule", { body });
        expect(response.status, body).to.equal(400);
      }
      const bogusId = await http(base, "GET", "/time/schedule/not*an*id");
      expect(bogusId.status).to.equal(400);
      const after = await http(base, "GET", `/time/schedule/${id}`);
      expect(after.json).to.deep.equal(before.json);
    });

    it("refuses a body that is not strict UTF-8 (invalid bytes, a BOM) with 400 and stores nothing", async function () {
      let stored = 0;
      const counting = Object.create(t.service) as typeof t.service;
      counting.schedule = (executeAtNs, callbackUrl, clientKey) => {
        stored += 1;
        return t.service.schedule(executeAtNs, callbackUrl, clientKey);
      };
      const app = buildRestApp(createTransportContext({ service: counting, logger: testLogger() }));
      const executeAt = (nowNs() + 3_600_000_000_000n).toString();
      const json = Buffer.from(JSON.stringify({ executeAt, callback: "http://127.0.0.1:9/hook-X" }));
      // The body with its "X" replaced by bytes that are not UTF-8 (decoded leniently they became U+FFFD, a valid URL).
      const withXAs = (bytes: number[]): Buffer => Buffer.concat([json.subarray(0, json.indexOf("X")), Buffer.from(bytes), json.subarray(json.indexOf("X") + 1)]);
      const cases: Array<[string, Buffer, string]> = [
        ["a lone 0xff", withXAs([0xff]), "body: is not valid UTF-8"],
        ["an overlong '/'", withXAs([0xc0, 0xaf]), "body: is not valid UTF-8"],
        ["a UTF-16 surrogate", withXAs([0xed, 0xa0, 0x80]), "body: is not valid UTF-8"],
        ["a truncated sequence", withXAs([0xe2, 0x82]), "body: is not valid UTF-8"],
        ["a byte order mark", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json]), "body: must not start with a byte order mark (send UTF-8 JSON without one, RFC 8259 §8.1)"],
      ];
      try {
        for (const [label, payload, message] of cases) {
          const response = await app.inject({ method: "POST", url: "/time/schedule", headers: { "content-type": "application/json" }, payload });
          expect(response.statusCode, label).to.equal(400);
          expect(response.json(), label).to.include({ message });
        }
        expect(stored).to.equal(0);
        // The same body in clean UTF-8 is stored: the refusals were about the bytes.
        const clean = await app.inject({ method: "POST", url: "/time/schedule", headers: { "content-type": "application/json" }, payload: json });
        expect(clean.statusCode, clean.body).to.equal(201);
        expect(stored).to.equal(1);
      } finally {
        await app.close();
      }
    });

    it("refuses a lone UTF-16 surrogate escape in any string, key included, with 400 naming the field, and stores nothing", async function () {
      let stored = 0;
      const counting = Object.create(t.service) as typeof t.service;
      counting.schedule = (executeAtNs, callbackUrl, clientKey) => {
        stored += 1;
        return t.service.schedule(executeAtNs, callbackUrl, clientKey);
      };
      const app = buildRestApp(createTransportContext({ service: counting, logger: testLogger() }));
      const executeAt = (nowNs() + 3_600_000_000_000n).toString();
      // JSON text as a client writes it: the escapes are six ASCII characters each, valid UTF-8 bytes. Parsed, a lone
      // one is a string no UTF-8 can hold: SQLite stored it as U+FFFD.
      const withCallback = (callback: string) => `{"executeAt":"${executeAt}","callback":"${callback}"}`;
      const hint = "; write a character outside the Basic Multilingual Plane as a surrogate pair, high then low (RFC 8259 §7, §8.2)";
      const cases: Array<[string, string, string]> = [
        ["a lone high surrogate", withCallback("http://127.0.0.1:9/hook-\\ud800"), "body.callback: contains a lone UTF-16 surrogate (\\ud800 at character 24)"],
        ["a lone high surrogate, upper-case escape", withCallback("http://127.0.0.1:9/\\uDBFFx"), "body.callback: contains a lone UTF-16 surrogate (\\udbff at character 19)"],
        ["a lone low surrogate", withCallback("\\udc00http://127.0.0.1:9/hook"), "body.callback: contains a lone UTF-16 surrogate (\\udc00 at character 0)"],
        ["a pair in the wrong order", withCallback("http://127.0.0.1:9/\\udc00\\ud800"), "body.callback: contains a lone UTF-16 surrogate (\\udc00 at character 19)"],
        ["a key", `{"executeAt":"${executeAt}","callback":"http://127.0.0.1:9/hook","x\\ud800":1}`, "body: a key contains a lone UTF-16 surrogate (\\ud800 at character 1)"],
        ["inside an array", `{"executeAt":"${executeAt}","callback":"http://127.0.0.1:9/hook","list":[1,{"a":"\\ud800"}]}`, "body.list[1].a: contains a lone UTF-16 surrogate (\\ud800 at character 0)"],
      ];
      try {
        for (const [label, payload, message] of cases) {
          const response = await app.inject({ method: "POST", url: "/time/schedule", headers: { "content-type": "application/json" }, payload });
          expect(response.statusCode, label).to.equal(400);
          expect(response.json(), label).to.include({ statusCode: 400, message: message + hint });
        }
        expect(stored).to.equal(0);
        // A surrogate pair is one character: parsed as such and stored (the URL keeps it percent-encoded or as is).
        const pair = await app.inject({ method: "POST", url: "/time/schedule", headers: { "content-type": "application/json" }, payload: withCallback("http://127.0.0.1:9/hook-\\ud83d\\ude00") });
        expect(pair.statusCode, pair.body).to.equal(201);
        expect(stored).to.equal(1);
      } finally {
        await app.close();
      }
    });
  });

  describe("open routes", function () {
    it("GET /node/info names the node, card and chain", async function () {
      const response = await http(base, "GET", "/node/info");
      expect(response.status).to.equal(200);
      expect(response.json).to.include({ nodeId: t.identity.nodeAddress, cardId: t.identity.cardId, protocol: "ATS/1", accuracyNs: DEV_CARD_DRIVER_ACCURACY_NS });
      expect((response.json as { certificateChainPem: string[] }).certificateChainPem).to.deep.equal(t.identity.certificateChainPem);
      // Run from the sources, not a release install: no BUILD-REVISION.json, so the revision is null, not a guess.
      expect(response.json).to.have.property("revision", null);
    });

    it("the NodeInfoBody schema takes a 40-hex revision or null (absent from older nodes), nothing else", async function () {
      const body = (await http(base, "GET", "/node/info")).json as object;
      expect(Value.Check(NodeInfoBody, body)).to.equal(true);
      for (const revision of ["0123456789abcdef0123456789abcdef01234567", null, undefined]) expect(Value.Check(NodeInfoBody, { ...body, revision }), String(revision)).to.equal(true);
      for (const revision of ["main", "0123456789ABCDEF0123456789abcdef01234567", 7]) expect(Value.Check(NodeInfoBody, { ...body, revision }), String(revision)).to.equal(false);
    });

    it("GET /health answers ok", async function () {
      const response = await http(base, "GET", "/health");
      expect(response.status).to.equal(200);
      expect(response.json).to.include({ status: "ok" });
    });

    it("GET /metrics exposes the timerpc_* metrics, and they move", async function () {
      await http(base, "GET", "/time/current");
      const first = await http(base, "GET", "/metrics");
      expect(first.status).to.equal(200);
      expect(first.headers.get("content-type")).to.match(/^text\/plain/);
      for (const name of ["timerpc_requests_total", "timerpc_accuracy_ns", "timerpc_consensus_latency", "timerpc_node_drift_ns", "timerpc_tamper_events_total"]) {
        expect(first.text).to.contain(name);
      }
      const count = (text: string): number => {
        const match = /timerpc_requests_total\{transport="rest",route="\/time\/current",status="200"\} (\d+)/.exec(text);
        return match === null ? 0 : Number(match[1]);
      };
      await http(base, "GET", "/time/current");
      const second = await http(base, "GET", "/metrics");
      expect(count(second.text)).to.be.greaterThan(count(first.text));
      expect(second.text).to.match(/timerpc_accuracy_ns_count [1-9]/);
    });

    it("GET /metrics: the signed accuracy against the verification limit, and no mesh series on a node without a mesh", async function () {
      const text = (await http(base, "GET", "/metrics")).text;
      const info = (await http(base, "GET", "/node/info")).json as { accuracyNs: number; maxAcceptableDriftNs: string };
      expect(text).to.match(new RegExp(`^timerpc_signed_accuracy_seconds ${info.accuracyNs / 1e9}$`, "m"));
      expect(text).to.match(new RegExp(`^timerpc_accuracy_limit_seconds ${Number(info.maxAcceptableDriftNs) / 1e9}$`, "m"));
      // The dev card's accuracy falls in a bucket of its own, far below the 100 ms top bucket.
      expect(text).to.match(/^timerpc_accuracy_ns_bucket\{le="100000000"\} [1-9]\d*$/m);
      expect(text).to.match(/^timerpc_accuracy_ns_bucket\{le="10"\} 0$/m);
      expect(text).not.to.match(/^timerpc_mesh_\w+[{ ]/m);
      // Every drop reason from the start (at zero until one happens), so that increase() sees the first one.
      for (const reason of DROP_REASONS) expect(text).to.match(new RegExp(`^timerpc_connections_dropped_total\\{reason="${reason}"\\} \\d+$`, "m"));
    });

    it("GET /metrics keeps prom-client's process metrics but not the per-handle lists, whose scrape cost grows with open connections", async function () {
      const text = (await http(base, "GET", "/metrics")).text;
      for (const kept of ["process_cpu_seconds_total", "process_open_fds", "nodejs_heap_size_used_bytes", "nodejs_eventloop_lag_p99_seconds"]) {
        expect(text, kept).to.match(new RegExp(`^${kept} `, "m"));
      }
      for (const omitted of OMITTED_DEFAULT_METRICS) expect(text, omitted).not.to.match(new RegExp(`^# HELP ${omitted} `, "m"));
    });

    it("GET /metrics observes the age of every served proof (timerpc_proof_age_seconds), not of other routes", async function () {
      const ageCount = (text: string): number => {
        const match = /timerpc_proof_age_seconds_count\{transport="rest"\} (\d+)/.exec(text);
        return match === null ? 0 : Number(match[1]);
      };
      const before = ageCount((await http(base, "GET", "/metrics")).text);
      await http(base, "GET", "/time/current");
      await http(base, "GET", "/time/current");
      await http(base, "GET", "/node/info");
      const after = await http(base, "GET", "/metrics");
      expect(ageCount(after.text)).to.equal(before + 2);
      // Every served proof is younger than the maximum serve age; the +Inf bucket holds them all.
      expect(after.text).to.match(/timerpc_proof_age_seconds_bucket\{le="60",transport="rest"\} \d+/);
      const sum = /timerpc_proof_age_seconds_sum\{transport="rest"\} ([\d.e+-]+)/.exec(after.text);
      // Seconds: a served proof is fresher than the 60 s serve limit (nanoseconds would read as billions).
      expect(Number(sum?.[1])).to.be.greaterThan(0).and.lessThan(2 * 60);
    });

    it("answers an unknown route with a 404 JSON body", async function () {
      const response = await http(base, "GET", "/nope");
      expect(response.status).to.equal(404);
      expect(response.json).to.deep.equal({ statusCode: 404, error: "Not Found", message: "Route GET /nope not found" });
    });
  });

  describe("buildRestApp without listening", function () {
    it("works with app.inject and maps an unexpected error to a generic 500", async function () {
      const failing = Object.create(t.service) as typeof t.service;
      failing.current = () => {
        throw new Error("secret internals /etc/keys");
      };
      const app = buildRestApp(createTransportContext({ service: failing, logger: testLogger() }));
      try {
        const ok = await app.inject({ method: "GET", url: "/health" });
        expect(ok.statusCode).to.equal(200);
        const broken = await app.inject({ method: "GET", url: "/time/current" });
        expect(broken.statusCode).to.equal(500);
        expect(broken.json()).to.deep.equal({ statusCode: 500, error: "Internal Server Error", message: "Internal server error" });
        expect(broken.body).not.to.contain("secret");
      } finally {
        await app.close();
      }
    });
  });
});

describe("node/api/rest with auth and rate limits", function () {
  const apiKey = "test-api-key-0123456789";
  let t: TestNode;

  before(async function () {
    t = await startTestNode({ overrides: { apiKeys: [apiKey], maxRequestsPerSecond: 5 } });
  });
  after(async function () {
    await t?.close();
  });

  it("requires x-api-key on the attested-time API and leaves health, info and metrics open", async function () {
    const base = t.node.endpoints.rest;
    const missing = await http(base, "GET", "/time/current");
    expect(missing.status).to.equal(401);
    const wrong = await http(base, "GET", "/time/current", { headers: { "x-api-key": "wrong-key-0123456789" } });
    expect(wrong.status).to.equal(401);
    expect((wrong.json as { message: string }).message).to.equal("Invalid API key");
    for (const path of ["/health", "/node/info", "/metrics"]) {
      expect((await http(base, "GET", path)).status, path).to.equal(200);
    }
    const ok = await http(base, "GET", "/time/current", { headers: { "x-api-key": apiKey } });
    expect(ok.status).to.equal(200);
  });

  it("answers 429 'Rate limit exceeded' beyond MAX_REQUESTS_PER_SECOND per client", async function () {
    const base = t.node.endpoints.rest;
    const statuses: number[] = [];
    let message = "";
    for (let i = 0; i < 30; i += 1) {
      const response = await http(base, "GET", "/time/current", { headers: { "x-api-key": apiKey } });
      statuses.push(response.status);
      if (response.status === 429) message = (response.json as { message: string }).message;
    }
    expect(statuses).to.include(429);
    expect(message).to.equal("Rate limit exceeded");
    const metrics = await http(base, "GET", "/metrics");
    expect(metrics.text).to.match(/timerpc_requests_total\{transport="rest",route="\/time\/current",status="429"\} [1-9]/);
  });

  it("throttles wrong API keys per address too: key guessing ends in 429, not endless 401s", async function () {
    const base = t.node.endpoints.rest;
    const statuses = new Set<number>();
    for (let i = 0; i < 30; i += 1) {
      statuses.add((await http(base, "GET", "/time/current", { headers: { "x-api-key": `guess-${i}-0123456789` } })).status);
    }
    expect([...statuses].sort()).to.deep.equal([401, 429]);
  });
});

describe("node/api/rest on tamper", function () {
  it("answers 503 once the card reports tampering, with health 503 and the tamper counted", async function () {
    const t = await startTestNode();
    try {
      const base = t.node.endpoints.rest;
      expect((await http(base, "GET", "/time/current")).status).to.equal(200);
      t.card.simulateTamper("enclosure opened");
      const response = await http(base, "GET", "/time/current");
      expect(response.status).to.equal(503);
      expect((response.json as { message: string }).message).to.contain("enclosure opened");
      const health = await http(base, "GET", "/health");
      expect(health.status).to.equal(503);
      expect(health.json).to.include({ status: "tampered" });
      const metrics = await http(base, "GET", "/metrics");
      expect(metrics.text).to.match(/timerpc_tamper_events_total 1/);
    } finally {
      await t.close();
    }
  });
});

describe("node/api/rest schedule quotas", function () {
  const [keyA, keyB] = ["quota-key-a-0123456789", "quota-key-b-0123456789"];
  let t: TestNode;

  before(async function () {
    t = await startTestNode({ overrides: { apiKeys: [keyA, keyB], scheduleMaxPending: 3, scheduleMaxPendingPerClient: 2 } });
  });
  after(async function () {
    await t?.close();
  });

  it("answers a client over its pending quota 429 naming the quota, and a full node 503 (neither a field error)", async function () {
    const schedule = (apiKey: string) =>
      http(t.node.endpoints.rest, "POST", "/time/schedule", {
        headers: { "x-api-key": apiKey },
        body: JSON.stringify({ executeAt: (nowNs() + 3_600_000_000_000n).toString(), callback: "http://127.0.0.1:9/quota" }),
      });
    expect((await schedule(keyA)).status).to.equal(201);
    expect((await schedule(keyA)).status).to.equal(201);
    const overQuota = await schedule(keyA);
    expect(overQuota.status).to.equal(429);
    expect(overQuota.json).to.deep.equal({ statusCode: 429, error: "Too Many Requests", message: "too many pending schedules for this client (2, limit 2)" });
    expect((await schedule(keyB)).status).to.equal(201); // another client is not held by A's quota
    const full = await schedule(keyB);
    expect(full.status).to.equal(503);
    expect(full.json).to.deep.equal({ statusCode: 503, error: "Service Unavailable", message: "node holds too many pending schedules" });
  });
});
