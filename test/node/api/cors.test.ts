/**
 * CORS on the node's public reads (node/api/cors.ts, setting corsAllowedOrigins): real nodes on 127.0.0.1, with the
 * GET /time/current fast path in front of fastify as in production.
 */
import { expect } from "chai";
import { loadConfig } from "../../../node/config";
import { CORS_PREFLIGHT_MAX_AGE_S } from "../../../node/api/cors";
import { http, startTestNode, type TestNode } from "./helpers";

const ALLOWED = "https://app.example.org";
const OTHER = "https://evil.example.net";

/** The CORS headers of an answer (null where absent), and its status. */
async function corsOf(base: string, method: string, path: string, headers: Record<string, string>, body?: string) {
  const response = await http(base, method, path, body === undefined ? { headers } : { headers, body });
  const header = (name: string) => response.headers.get(name);
  return {
    status: response.status,
    allowOrigin: header("access-control-allow-origin"),
    allowCredentials: header("access-control-allow-credentials"),
    allowMethods: header("access-control-allow-methods"),
    maxAge: header("access-control-max-age"),
    vary: header("vary"),
  };
}

describe("node/api/cors", function () {
  this.timeout(30_000);

  describe("with an allowed origin listed, no API keys", function () {
    let t: TestNode;
    let base: string;
    before(async function () {
      t = await startTestNode({ overrides: { corsAllowedOrigins: [ALLOWED, "http://localhost:5173"] } });
      base = t.node.endpoints.rest;
    });
    after(async function () {
      await t?.close();
    });

    it("lets a listed origin read every public GET, the fast path's GET /time/current included, never with credentials", async function () {
      // "/time/current" is answered by the fast path; "/time/current?via=fastify" by fastify's route (a query string
      // is left to fastify): both must carry the same headers.
      for (const path of ["/time/current", "/time/current?via=fastify", "/node/info", "/health", "/mesh/state"]) {
        const answer = await corsOf(base, "GET", path, { origin: ALLOWED });
        expect(answer, path).to.deep.include({ status: 200, allowOrigin: ALLOWED, allowCredentials: null, vary: "Origin" });
      }
      expect((await corsOf(base, "GET", "/node/info", { origin: "http://localhost:5173" })).allowOrigin).to.equal("http://localhost:5173");
      // fastify answers HEAD for every GET route, with the GET route's hooks.
      expect(await corsOf(base, "HEAD", "/node/info", { origin: ALLOWED })).to.deep.include({ status: 200, allowOrigin: ALLOWED, vary: "Origin" });
    });

    it("gives an origin not on the list, and a request without Origin, no CORS header but Vary: Origin", async function () {
      for (const headers of [{ origin: OTHER }, { origin: "null" }, { origin: `${ALLOWED}:443` }, {}]) {
        for (const path of ["/time/current", "/time/current?via=fastify", "/node/info", "/health"]) {
          const answer = await corsOf(base, "GET", path, headers);
          expect(answer, `${path} ${JSON.stringify(headers)}`).to.deep.include({ status: 200, allowOrigin: null, allowMethods: null, vary: "Origin" });
        }
      }
    });

    it("answers a preflight on a public read with 204, GET and HEAD, and a short max-age; a foreign origin's without CORS headers", async function () {
      const preflight = { origin: ALLOWED, "access-control-request-method": "GET" };
      for (const path of ["/time/current", "/node/info", "/health", "/mesh/state"]) {
        expect(await corsOf(base, "OPTIONS", path, preflight), path).to.deep.equal({
          status: 204,
          allowOrigin: ALLOWED,
          allowCredentials: null,
          allowMethods: "GET, HEAD",
          maxAge: String(CORS_PREFLIGHT_MAX_AGE_S),
          vary: "Origin",
        });
      }
      const foreign = await corsOf(base, "OPTIONS", "/node/info", { ...preflight, origin: OTHER });
      expect(foreign).to.deep.equal({ status: 204, allowOrigin: null, allowCredentials: null, allowMethods: null, maxAge: null, vary: "Origin" });
    });

    it("gives POST, schedule, operator and unknown routes no CORS header and no preflight, even for a listed origin", async function () {
      const proof = t.service.current().json;
      const verifyBody = JSON.stringify({ nanoMoment: proof.nanoMoment, proof: proof.proof });
      const verify = await corsOf(base, "POST", "/time/verify", { origin: ALLOWED }, verifyBody);
      expect(verify).to.deep.include({ status: 200, allowOrigin: null, vary: null });
      const scheduleBody = JSON.stringify({ executeAt: String(BigInt(Date.now()) * 1_000_000n + 60_000_000_000n), callback: "http://127.0.0.1:9/x" });
      expect(await corsOf(base, "POST", "/time/schedule", { origin: ALLOWED }, scheduleBody)).to.deep.include({ status: 201, allowOrigin: null, vary: null });
      expect(await corsOf(base, "GET", "/time/schedule/0123", { origin: ALLOWED })).to.deep.include({ status: 404, allowOrigin: null, vary: null });
      expect(await corsOf(base, "GET", "/metrics", { origin: ALLOWED })).to.deep.include({ status: 200, allowOrigin: null, vary: null });
      for (const path of ["/time/verify", "/time/schedule", "/metrics", "/elsewhere"]) {
        const preflight = await corsOf(base, "OPTIONS", path, { origin: ALLOWED, "access-control-request-method": "POST" });
        expect(preflight, path).to.deep.include({ status: 404, allowOrigin: null, allowMethods: null });
      }
    });
  });

  it("gives the authenticated GET /time/current of a node with API keys no CORS, and still the open reads", async function () {
    const apiKey = "cors-test-api-key-0123456789";
    const t = await startTestNode({ overrides: { corsAllowedOrigins: [ALLOWED], apiKeys: [apiKey] } });
    try {
      const base = t.node.endpoints.rest;
      for (const path of ["/time/current", "/time/current?via=fastify"]) {
        expect(await corsOf(base, "GET", path, { origin: ALLOWED, "x-api-key": apiKey }), path).to.deep.include({ status: 200, allowOrigin: null, vary: null });
        expect(await corsOf(base, "GET", path, { origin: ALLOWED }), path).to.deep.include({ status: 401, allowOrigin: null, vary: null });
      }
      expect((await corsOf(base, "OPTIONS", "/time/current", { origin: ALLOWED, "access-control-request-method": "GET" })).status).to.equal(404);
      expect(await corsOf(base, "GET", "/node/info", { origin: ALLOWED })).to.deep.include({ status: 200, allowOrigin: ALLOWED });
    } finally {
      await t.close();
    }
  });

  it("answers '*' with '*' to any origin, and errors of a public read carry the headers too", async function () {
    const t = await startTestNode({ overrides: { corsAllowedOrigins: ["*"], maxRequestsPerSecond: 1 } });
    try {
      const base = t.node.endpoints.rest;
      // One token per second per address: the first read is served, the second refused with 429 (fast path and
      // fastify's error handler alike); a page must be able to read both.
      for (const path of ["/time/current", "/node/info"]) {
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        expect(await corsOf(base, "GET", path, { origin: OTHER }), path).to.deep.include({ status: 200, allowOrigin: "*", vary: "Origin" });
        expect(await corsOf(base, "GET", path, { origin: OTHER }), path).to.deep.include({ status: 429, allowOrigin: "*", vary: "Origin" });
      }
    } finally {
      await t.close();
    }
  });

  it("answers a preflight refused with 429 with the CORS headers of a listed origin, so a browser sees the 429, not a CORS failure", async function () {
    const t = await startTestNode({ overrides: { corsAllowedOrigins: [ALLOWED], maxRequestsPerSecond: 1 } });
    try {
      const base = t.node.endpoints.rest;
      const preflight = { "access-control-request-method": "GET" };
      // One token per second per address: the first preflight is answered, the next two within the second are refused.
      expect(await corsOf(base, "OPTIONS", "/node/info", { ...preflight, origin: ALLOWED })).to.deep.include({ status: 204, allowOrigin: ALLOWED });
      const refused = await corsOf(base, "OPTIONS", "/node/info", { ...preflight, origin: ALLOWED });
      expect(refused).to.deep.equal({ status: 429, allowOrigin: ALLOWED, allowCredentials: null, allowMethods: null, maxAge: null, vary: "Origin" });
      // An origin not on the list still gets none.
      const foreign = await corsOf(base, "OPTIONS", "/node/info", { ...preflight, origin: OTHER });
      expect(foreign).to.deep.equal({ status: 429, allowOrigin: null, allowCredentials: null, allowMethods: null, maxAge: null, vary: "Origin" });
    } finally {
      await t.close();
    }
  });

  it("is off by default: no CORS header, no Vary, no preflight route", async function () {
    const t = await startTestNode();
    try {
      const base = t.node.endpoints.rest;
      for (const path of ["/time/current", "/time/current?via=fastify", "/node/info", "/health"]) {
        expect(await corsOf(base, "GET", path, { origin: ALLOWED }), path).to.deep.include({ status: 200, allowOrigin: null, vary: null });
      }
      expect((await corsOf(base, "OPTIONS", "/node/info", { origin: ALLOWED, "access-control-request-method": "GET" })).status).to.equal(404);
    } finally {
      await t.close();
    }
  });

  it("refuses, once at load, entries that are not origins as browsers send them, naming the entry", function () {
    const load = (origins: unknown) => () => loadConfig({ env: {}, overrides: { corsAllowedOrigins: origins } });
    const cases: [unknown, RegExp][] = [
      [["https://app.example.org/"], /corsAllowedOrigins.*entry 0 must be an origin such as/],
      [["app.example.org"], /entry 0 must be an origin such as/],
      [["https://APP.example.org"], /entry 0 must be an origin such as/],
      [["ftp://app.example.org"], /entry 0 must be an origin such as/],
      [["null"], /entry 0 must be an origin such as/],
      [[ALLOWED, "https://app.example.org:443"], /corsAllowedOrigins.*entry 1 must be an origin as browsers send it \(https:\/\/app\.example\.org\)/],
      [["http://localhost:99999"], /entry 0 must be an origin as browsers send it/],
      [["*", ALLOWED], /corsAllowedOrigins.*must be '\*' alone or a list of origins, not both/],
    ];
    for (const [origins, message] of cases) expect(load(origins), JSON.stringify(origins)).to.throw(message);
    expect(loadConfig({ env: {}, overrides: { corsAllowedOrigins: ["http://[::1]:8080", "http://localhost:5173", ALLOWED] } }).corsAllowedOrigins).to.have.length(3);
    expect(loadConfig({ env: { ATS_CORS_ALLOWED_ORIGINS: `${ALLOWED},http://localhost:3000` } }).corsAllowedOrigins).to.deep.equal([ALLOWED, "http://localhost:3000"]);
    expect(loadConfig({ env: {} }).corsAllowedOrigins).to.deep.equal([]);
  });
});
