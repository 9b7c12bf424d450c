/**
 * REST transport (fastify). `buildRestApp` builds the app without listening (tests use `app.inject()`);
 * node/server.ts listens.
 *
 * Detail: docs/protocol.md §9.2.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { ValidationError } from "../../protocol/errors";
import { parseNsString } from "../../protocol/json";
import type { TimeProof } from "../../protocol/types";
import type { TlsMaterial } from "./tls";
import type { ScheduleRecord } from "../core/types";
import { API_KEY_HEADER } from "../../wire/auth";
import { clientKeyForIp } from "./auth";
import { admitClient, verifyWithOptionalChain, type TransportContext } from "./context";
import {
  createCurrentTimeFastPath,
  CURRENT_TIME_HEADERS,
  CURRENT_TIME_PATH,
  errorBody,
  JSON_CONTENT_TYPE,
  reportRequestError,
} from "./currentTimeFastPath";
import { toHttpError } from "../../wire/errorMapping";
import { timeoutSweepIntervalMs } from "./connectionGuard";
import { CORS_OPEN_READ_PATHS } from "./cors";
import { checkJsonCharset, parseJsonBody } from "./jsonBody";
import {
  ErrorBody,
  HealthBody,
  MeshStateBody,
  NodeInfoBody,
  ProofBody,
  ScheduleBody,
  ScheduleCreated,
  ScheduleParams,
  ScheduleRecordBody,
  VerifyAnswer,
  VerifyBody,
} from "../../wire/rest";


/*
 * Routes (docs/protocol.md §9.2):
 *
 *   GET  /time/current        200 ProofJson (the service's pre-serialised body, no per-request work;   [auth]
 *                             served by currentTimeFastPath.ts ahead of fastify, same answers)
 *   POST /time/verify         200 { valid, reason, detail? }; body { nanoMoment, proof,                [auth]
 *                             certificateChainPem? } (a chain lets the node check a card it does not know)
 *   POST /time/schedule       201 { id, status, executeAt, callback }                                   [auth]
 *   GET  /time/schedule/:id   200 schedule record | 404                                                 [auth]
 *   GET  /node/info           200 node id, card id and chain, settings clients need                     [open]
 *   GET  /health              200 ok/degraded, 503 starting/stale/tampered                              [open]
 *   GET  /metrics             Prometheus text                                                           [open]
 *   OPTIONS (CORS preflight) on the public reads when `corsAllowedOrigins` is set (cors.ts)
 *
 * Request bodies are parsed losslessly (protocol/json.ts): an unquoted integer above 2^53 is kept exact and then
 * rejected by the schema where a decimal string is due, never rounded into a different moment. They must be
 * strict UTF-8 (jsonBody.ts): invalid bytes, a BOM or nesting deeper than 32 levels → 400, another charset → 415.
 * Every error goes through the one error handler (errorMapping.ts): 4xx with a message for the caller, 5xx
 * generic. Client errors are logged sampled and without stacks (sampledLog.ts), server faults in full.
 */
/** Error responses every route may give. */
const errorResponses = {
  400: ErrorBody,
  401: ErrorBody,
  404: ErrorBody,
  413: ErrorBody,
  415: ErrorBody,
  429: ErrorBody,
  500: ErrorBody,
  503: ErrorBody,
} as const;

/** JSON view of a schedule record (ns as decimal strings). */
export function scheduleRecordToJson(record: ScheduleRecord): ScheduleRecordBody {
  return {
    id: record.id,
    status: record.status,
    executeAt: record.executeAtNs.toString(),
    callback: record.callbackUrl,
    attempts: record.attempts,
    lastError: record.lastError,
    createdAt: record.createdAtNs.toString(),
    deliveredAt: record.deliveredAtNs === null ? null : record.deliveredAtNs.toString(),
    nextAttemptAt: record.nextAttemptAtNs === null ? null : record.nextAttemptAtNs.toString(),
    proof: record.proof,
  };
}

/** The TimeProof of a schema-checked verify body. Content (lengths, signatures) is left to service.verify(). */
function proofFromVerifyBody(body: VerifyBody): TimeProof {
  const nanoMoment = parseNsString(body.nanoMoment, "nanoMoment");
  const { hardwareSignature, nodeSignature, accuracyNs, hardwareId } = body.proof;
  if (hardwareId !== undefined && !hardwareSignature.startsWith(hardwareId)) {
    throw new ValidationError("proof.hardwareId", "must equal the first 32 bytes of proof.hardwareSignature");
  }
  return { nanoMoment, hardwareSignature, nodeSignature, accuracy: accuracyNs };
}

export interface RestAppOptions {
  /** Extra fastify logging of every request (off by default: the hot path stays lean; errors are always logged). */
  logRequests?: boolean;
  /**
   * Answer `GET /time/current` on node:http in front of fastify (currentTimeFastPath.ts). Default on; off sends
   * every request through fastify (tests compare the two).
   */
  fastPath?: boolean;
  /** Serve HTTPS (and so WSS on the same server) with this certificate and key; plaintext HTTP when absent. */
  tls?: TlsMaterial | null;
}

export function buildRestApp(context: TransportContext, options: RestAppOptions = {}): FastifyInstance {
  const { service, metrics, auth, rateLimiter, limits } = context;
  const loggerInstance: FastifyBaseLogger = context.logger;
  const fastPath = options.fastPath === false ? null : createCurrentTimeFastPath(context, loggerInstance);
  const app = Fastify({
    loggerInstance,
    logController: new LogController({ disableRequestLogging: options.logRequests !== true }),
    bodyLimit: limits.bodyLimitBytes,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Fastify applies the timeouts above only to a server it creates itself: the factory sets them.
    serverFactory: (handler) => {
      const timeouts = {
        requestTimeout: limits.requestTimeoutMs,
        // The request line and headers get the same bound (Node's default is 60 s on its own).
        headersTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        // Node enforces requestTimeout/headersTimeout only when it sweeps its connections (default every 30 s).
        connectionsCheckingInterval: timeoutSweepIntervalMs(limits.requestTimeoutMs),
      };
      const tls = options.tls ?? null;
      // An https.Server is an http.Server with a TLS socket: fastify, the fast path and the WebSocket upgrade
      // (ws.ts) see the same requests. The handshake gets the connection timeout too.
      const server: Server =
        tls === null
          ? createServer(timeouts)
          : createHttpsServer({ ...timeouts, cert: tls.certificateChainPem, key: tls.privateKeyPem(), handshakeTimeout: limits.connectionTimeoutMs });
      context.connections.watch(server);
      server.on("request", (request: IncomingMessage, response: ServerResponse) => {
        if (!context.connections.admit(request, response)) return;
        if (fastPath === null || !fastPath.tryServe(request, response)) handler(request, response);
      });
      // Node answers an unknown Expect with 417 on its own and keeps the connection: through admit(), so that answer
      // meets the pipelining bound and the stall sweep like every other (connectionGuard.ts).
      server.on("checkExpectation", (request: IncomingMessage, response: ServerResponse) => {
        if (!context.connections.admit(request, response)) return;
        response.writeHead(417);
        response.end();
      });
      // No server.setTimeout: Node arms that socket timeout anew at every request and refreshes it on every read and
      // write; the guard's stall sweep bounds a request in flight instead (connectionGuard.ts, stalledRequestTimeoutMs).
      return server;
    },
    forceCloseConnections: true,
    return503OnClosing: true,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false, useDefaults: false } },
  });

  // Only JSON request bodies, parsed losslessly.
  app.removeAllContentTypeParsers();
  // Raw bytes, decoded here (jsonBody.ts): fastify's string decoding would replace invalid UTF-8 silently.
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    try {
      checkJsonCharset(request.headers["content-type"]);
      done(null, parseJsonBody(body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  app.setErrorHandler((error, request, reply) => {
    const answer = toHttpError(error);
    reportRequestError(context, request.log, error, request.url, answer, reply.raw);
    if (answer.headers !== undefined) void reply.headers(answer.headers);
    void reply.code(answer.statusCode).type(JSON_CONTENT_TYPE).send(errorBody(answer));
  });
  // While closing, fastify answers 503 (return503OnClosing): the fast path steps aside for it.
  if (fastPath !== null) app.addHook("preClose", (done) => {
    fastPath.stop();
    done();
  });

  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).type(JSON_CONTENT_TYPE).send({
      statusCode: 404,
      error: "Not Found",
      message: `Route ${request.method} ${request.url.split("?")[0] ?? ""} not found`,
    });
  });

  app.addHook("onResponse", (request, reply, done) => {
    metrics.countRequest("rest", request.routeOptions.url ?? "unmatched", String(reply.statusCode));
    done();
  });
  // A request its client abandons (e.g. closes before sending the body it announced) gets no response, so
  // onResponse never sees it: counted here as "aborted", a client error like any 4xx, never a 5xx.
  app.addHook("onRequestAbort", (request, done) => {
    metrics.countRequest("rest", request.routeOptions.url ?? "unmatched", "aborted");
    done();
  });

  // Auth and rate limiting of the attested-time API; no hook at all when neither is configured (hot path).
  const guarded = auth.required || rateLimiter.enabled;
  // Who each admitted request is (for per-client quotas); without the hook, the caller's address.
  const clientKeys = new WeakMap<FastifyRequest, string>();
  const clientKeyOf = (request: FastifyRequest): string => clientKeys.get(request) ?? clientKeyForIp(request.ip);
  const guard = (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void => {
    try {
      const header = request.headers[API_KEY_HEADER];
      clientKeys.set(request, admitClient(context, typeof header === "string" ? header : undefined, request.ip));
      done();
    } catch (error) {
      done(error as Error);
    }
  };
  const guardHooks = guarded ? { onRequest: guard } : {};
  // The open routes need no key but still take a token from the caller's address: otherwise a flood of
  // /metrics renders is answered as fast as it comes, and no 429 ever engages the connection guard.
  const openGuard = (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void => {
    try {
      rateLimiter.take(clientKeyForIp(request.ip));
      done();
    } catch (error) {
      done(error as Error);
    }
  };
  const openHooks = rateLimiter.enabled ? { onRequest: openGuard } : {};
  // CORS on the public reads only (cors.ts), on every answer they give (errors too: a page may read its 429 or 503).
  const { cors } = context;
  const corsOnSend = (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void => {
    void reply.headers(cors.answerHeaders(request.headers.origin));
    done(null, payload);
  };
  const corsHooks = cors.enabled ? { onSend: corsOnSend } : {};
  const currentTimeCorsHooks = cors.coversCurrentTime(auth.required) ? corsHooks : {};
  const corsPaths: string[] = cors.enabled ? [...CORS_OPEN_READ_PATHS] : [];
  if (cors.coversCurrentTime(auth.required)) corsPaths.push(CURRENT_TIME_PATH);
  for (const path of corsPaths) {
    // corsHooks too: a preflight refused by the rate limit (429) carries the origin's CORS headers, so the browser
    // reports the status rather than a missing Access-Control-Allow-Origin (its page still cannot read the answer:
    // the Fetch standard fails every preflight without an ok status).
    app.options(path, { ...openHooks, ...corsHooks }, (request, reply) => {
      void reply.code(204).headers(cors.preflightHeaders(request.headers.origin)).send();
    });
  }

  app.get(
    CURRENT_TIME_PATH,
    { ...guardHooks, ...currentTimeCorsHooks, schema: { response: { 200: ProofBody, ...errorResponses } } },
    (_request, reply) => {
      const signed = service.current();
      metrics.countServedProof("rest", signed);
      // A string with a JSON content type is sent as is: no serialisation per request. A proof is a reading of
      // the clock, so no cache may keep it.
      void reply.headers(CURRENT_TIME_HEADERS).send(signed.body);
    },
  );

  app.post<{ Body: VerifyBody }>(
    "/time/verify",
    { ...guardHooks, schema: { body: VerifyBody, response: { 200: VerifyAnswer, ...errorResponses } } },
    async (request) => {
      const outcome = await verifyWithOptionalChain(service, proofFromVerifyBody(request.body), request.body.certificateChainPem);
      return outcome.valid ? { valid: true, reason: null } : { valid: false, reason: outcome.reason, detail: outcome.detail };
    },
  );

  app.post<{ Body: ScheduleBody }>(
    "/time/schedule",
    {
      ...guardHooks,
      schema: { body: ScheduleBody, response: { 201: ScheduleCreated, ...errorResponses } },
    },
    async (request, reply) => {
      const executeAtNs = parseNsString(request.body.executeAt, "executeAt");
      const record = await service.schedule(executeAtNs, request.body.callback, clientKeyOf(request));
      void reply.code(201);
      return { id: record.id, status: record.status, executeAt: record.executeAtNs.toString(), callback: record.callbackUrl };
    },
  );

  app.get<{ Params: { id: string } }>(
    "/time/schedule/:id",
    { ...guardHooks, schema: { params: ScheduleParams, response: { 200: ScheduleRecordBody, ...errorResponses } } },
    async (request) => scheduleRecordToJson(service.getSchedule(request.params.id)),
  );

  app.get("/node/info", { ...openHooks, ...corsHooks, schema: { response: { 200: NodeInfoBody, ...errorResponses } } }, async () => {
    const info = service.info();
    return {
      ...info,
      tickIntervalNs: info.tickIntervalNs.toString(),
      maxAttestationAgeNs: info.maxAttestationAgeNs.toString(),
      maxFutureDriftNs: info.maxFutureDriftNs.toString(),
      maxAcceptableDriftNs: info.maxAcceptableDriftNs.toString(),
      archiveIntervalNs: info.archiveIntervalNs.toString(),
      authRequired: auth.required,
      maxRequestsPerSecond: rateLimiter.ratePerSecond,
      currentLoad: context.load.current(),
    };
  });

  app.get("/health", { ...openHooks, ...corsHooks, schema: { response: { 200: HealthBody, 503: HealthBody } } }, async (_request, reply) => {
    const health = service.health();
    void reply.code(health.status === "ok" || health.status === "degraded" ? 200 : 503);
    return {
      status: health.status,
      reason: health.reason,
      lastProofAgeNs: health.lastProofAgeNs === null ? null : health.lastProofAgeNs.toString(),
      measuredErrorNs: health.measuredErrorNs,
      convergenceState: service.meshState().convergenceState,
      ...(health.card === undefined ? {} : { card: health.card }),
    };
  });

  app.get("/mesh/state", { ...openHooks, ...corsHooks, schema: { response: { 200: MeshStateBody, ...errorResponses } } }, async () => service.meshState());

  app.get(
    "/metrics",
    { ...openHooks, schema: { response: { 200: { type: "string" } } } },
    async (_request, reply) => {
      const text = await metrics.render();
      void reply.type(metrics.contentType);
      return text;
    },
  );

  return app;
}
