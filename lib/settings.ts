/**
 * The settings framework of every program (node, and the relayer, gateway and agent to come): each declares ONE
 * table of settings (name, environment variable, description, type, default, bounds, secret flag) with
 * `setting()`, spreads BASE_SETTINGS into it, and gets from `defineSettings(table)` the loader (defaults, then a
 * JSON file, then the environment, then overrides; validated once; every error names the setting, where the
 * value came from, its variable and the bound it broke), the description (for `<program> settings` and each
 * program's docs page) and the redacted view for logs. As Chainlink's ea-framework does it, the table is the
 * documentation.
 *
 * File format: a JSON object whose keys are the setting names (unknown keys are rejected, to catch typos).
 * Nanosecond settings are decimal strings ("1000000") or safe JSON integers; lists are JSON arrays; maps are JSON
 * objects. In the environment, lists are comma-separated and maps are JSON. Relative paths in the file resolve
 * against the file's folder; relative paths from the environment resolve against the working directory.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { ValidationError } from "../protocol/errors";
import { hashApiKey, type ApiKeyHash } from "./apiKeys";

/** Parsed value of each setting kind. */
export interface SettingKinds {
  /** Free text (bounded length). */
  string: string;
  /** A filesystem path, resolved to an absolute path when loaded. */
  path: string;
  /** A safe integer (ports, counts, bytes, ms). */
  integer: number;
  /** A nanosecond value, uint128-safe. */
  ns: bigint;
  boolean: boolean;
  /** One of `choices`. */
  choice: string;
  /** A list of non-empty strings. */
  list: readonly string[];
  /** PEM certificates: each entry is PEM text or a path to a PEM file; loaded as PEM text. */
  pemList: readonly string[];
  /** API keys: each entry is the key itself or "sha256:<64 hex>"; loaded as SHA-256 hashes. */
  apiKeyList: readonly ApiKeyHash[];
  /** A map of non-empty names to non-empty strings. */
  map: Readonly<Record<string, string>>;
}
export type SettingKind = keyof SettingKinds;

export interface SettingDefinition<K extends SettingKind> {
  kind: K;
  /** Environment variable that overrides the file. */
  env: string;
  /**
   * Other names of the same variable (e.g. the service description's name without the ATS_ prefix), read like
   * `env`. Set to different values at once they are refused: no rule of precedence to guess.
   */
  envAliases?: readonly string[];
  description: string;
  default: SettingKinds[K];
  /** Inclusive bounds for integer/ns settings; for lists, the maximum number of entries is `max`. */
  min?: K extends "ns" ? bigint : number;
  max?: K extends "ns" ? bigint : number;
  /** For `choice`. */
  choices?: readonly string[];
  /** For `string`/`list` entries. */
  pattern?: RegExp;
  patternHint?: string;
  /** Hidden by `redactedConfig()` and never echoed in error messages. */
  secret: boolean;
}

export function setting<K extends SettingKind>(definition: SettingDefinition<K>): SettingDefinition<K> {
  return definition;
}

/** pino levels. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** How a program writes its log lines: JSON for collectors, or one readable line each. */
export const LOG_FORMATS = ["json", "pretty"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

type AnySetting = SettingDefinition<SettingKind>;

/** A table of settings: name → definition. */
export type SettingsTable = Readonly<Record<string, AnySetting>>;

/** The loaded values of a table, each of its kind's type. */
export type SettingValues<T extends SettingsTable> = { readonly [N in keyof T]: SettingKinds[T[N]["kind"]] };

/** A failure of a rule about several settings: names the setting it reports (source: the loaded values). */
export type SettingFailure = (name: string, message: string, value?: unknown) => never;

export interface SettingsRules<T extends SettingsTable> {
  /** Rules that involve two settings; report with `fail`. */
  checkCrossFieldRules?: (values: SettingValues<T>, fail: SettingFailure) => void;
}

export interface SettingDescription {
  name: string;
  env: string;
  /** Other accepted names of `env` (see SettingDefinition.envAliases); usually empty. */
  envAliases: string[];
  kind: SettingKind;
  description: string;
  default: string;
  bounds: string | null;
  secret: boolean;
}

export interface LoadSettingsOptions {
  /** JSON config file; optional (defaults + env only when absent). */
  file?: string;
  /** Defaults to process.env. Only the variables named in the table are read. */
  env?: NodeJS.ProcessEnv;
  /** Applied after file and env (tests, `ats-node dev`). Values take the file's JSON shapes or parsed values. */
  overrides?: Partial<Record<string, unknown>>;
  /** Base of relative paths from env/overrides/defaults; defaults to process.cwd(). */
  cwd?: string;
}

/** Where a raw value came from, for error messages. */
type Source = { kind: "default" } | { kind: "file"; file: string } | { kind: "env"; variable: string } | { kind: "override" };

export interface Settings<T extends SettingsTable> {
  readonly table: T;
  readonly names: readonly (keyof T & string)[];
  describe(): SettingDescription[];
  /**
   * Loads and validates: defaults, then the file, then the environment, then `overrides`. Throws ValidationError
   * (field `config.<name>`) naming the setting, its source, its env variable and the bound.
   */
  load(options?: LoadSettingsOptions): SettingValues<T>;
  /** A JSON-safe view for logs: secrets hidden, ns as decimal strings, PEMs counted. */
  redact(values: SettingValues<T>): Record<string, unknown>;
}

/** Settings every program has: how it logs. Spread last into a program's table (they are listed last). */
export const BASE_SETTINGS = {
  logLevel: setting({
    kind: "choice",
    env: "ATS_LOG_LEVEL",
    description: "pino log level.",
    default: "info",
    choices: LOG_LEVELS,
    secret: false,
  }),
  logFormat: setting({
    kind: "choice",
    env: "ATS_LOG_FORMAT",
    description:
      "How the program writes its logs to stderr. 'json' (default): one pino JSON object per line, for log collectors. 'pretty': one readable line per entry (time, level, message, fields), for a terminal; `ats-node start|dev --pretty` sets it too.",
    default: "json",
    choices: LOG_FORMATS,
    secret: false,
  }),
} as const;

export function defineSettings<T extends SettingsTable>(table: T, rules?: SettingsRules<T>): Settings<T> {
  /** A plain description of one setting, for `ats-node settings` and the docs. */


  function definitionOf(name: string): AnySetting {
    return table[name] as AnySetting;
  }

  const names = Object.keys(table) as (keyof T & string)[];

  function boundsText(definition: AnySetting): string | null {
    const { min, max, choices, pattern } = definition;
    if (choices !== undefined) return `one of ${choices.join(", ")}`;
    const isList = ["list", "pemList", "apiKeyList", "map"].includes(definition.kind);
    if (isList) return max === undefined ? null : `at most ${max.toString()} entries`;
    if (min !== undefined && max !== undefined) return `${min.toString()}..${max.toString()}`;
    if (pattern !== undefined) return definition.patternHint ?? pattern.source;
    return null;
  }

  function describe(): SettingDescription[] {
    return names.map((name) => {
      const definition = definitionOf(name);
      return {
        name,
        env: definition.env,
        envAliases: [...(definition.envAliases ?? [])],
        kind: definition.kind,
        description: definition.description,
        default: displayValue(definition, definition.default as SettingKinds[SettingKind]),
        bounds: boundsText(definition),
        secret: definition.secret,
      };
    });
  }

  function displayValue(definition: AnySetting, value: SettingKinds[SettingKind]): string {
    if (definition.secret) return Array.isArray(value) ? `[redacted: ${value.length} entries]` : value === "" ? '""' : "[redacted]";
    if (typeof value === "bigint") return value.toString();
    return JSON.stringify(value);
  }



  function sourceText(source: Source): string {
    switch (source.kind) {
      case "default":
        return "the default";
      case "file":
        return `config file ${source.file}`;
      case "env":
        return `environment variable ${source.variable}`;
      case "override":
        return "the caller";
    }
  }

  function fail(name: string, source: Source, message: string, value?: unknown): never {
    const definition = definitionOf(name);
    const shown = definition.secret || value === undefined ? "" : ` (got ${preview(value)})`;
    const envHint = source.kind === "env" ? "" : ` [env ${definition.env}]`;
    throw new ValidationError(`config.${name}`, `${message}${shown}, from ${sourceText(source)}${envHint}`, {
      setting: name,
      env: definition.env,
      source: sourceText(source),
    });
  }

  function preview(value: unknown): string {
    const text = typeof value === "string" ? JSON.stringify(value) : typeof value === "bigint" ? value.toString() : JSON.stringify(value);
    const safe = text ?? String(value);
    return safe.length > 80 ? `${safe.slice(0, 80)}…` : safe;
  }

  const DECIMAL_PATTERN = /^(0|[1-9][0-9]*)$/;
  const INTEGER_PATTERN = /^-?(0|[1-9][0-9]*)$/;

  function parseInteger(name: string, raw: unknown, source: Source): number {
    const definition = definitionOf(name);
    let value: number;
    if (typeof raw === "number") value = raw;
    else if (typeof raw === "string" && INTEGER_PATTERN.test(raw.trim())) value = Number(raw.trim());
    else return fail(name, source, "must be an integer", raw);
    if (!Number.isSafeInteger(value)) fail(name, source, "must be a safe integer", raw);
    const min = definition.min as number;
    const max = definition.max as number;
    if (value < min || value > max) fail(name, source, `must be between ${min} and ${max}`, raw);
    return value;
  }

  function parseNs(name: string, raw: unknown, source: Source): bigint {
    const definition = definitionOf(name);
    let value: bigint;
    if (typeof raw === "bigint") value = raw;
    else if (typeof raw === "number" && Number.isSafeInteger(raw)) value = BigInt(raw);
    else if (typeof raw === "string" && DECIMAL_PATTERN.test(raw.trim())) value = BigInt(raw.trim());
    else return fail(name, source, "must be a non-negative decimal integer of nanoseconds (a string above 2^53)", raw);
    const min = definition.min as bigint;
    const max = definition.max as bigint;
    if (value < min || value > max) fail(name, source, `must be between ${min} and ${max} ns`, raw);
    return value;
  }

  function parseBoolean(name: string, raw: unknown, source: Source): boolean {
    if (typeof raw === "boolean") return raw;
    if (typeof raw === "string") {
      const lowered = raw.trim().toLowerCase();
      if (["true", "1", "yes", "on"].includes(lowered)) return true;
      if (["false", "0", "no", "off"].includes(lowered)) return false;
    }
    return fail(name, source, "must be true or false", raw);
  }

  function parseString(name: string, raw: unknown, source: Source): string {
    const definition = definitionOf(name);
    if (typeof raw !== "string" || raw.length === 0) return fail(name, source, "must be a non-empty string", raw);
    if (definition.pattern !== undefined && !definition.pattern.test(raw)) {
      fail(name, source, `must be ${definition.patternHint ?? definition.pattern.source}`, raw);
    }
    if (definition.choices !== undefined && !definition.choices.includes(raw)) {
      fail(name, source, `must be one of ${definition.choices.join(", ")}`, raw);
    }
    return raw;
  }

  function parseStringArray(name: string, raw: unknown, source: Source): string[] {
    const definition = definitionOf(name);
    let items: unknown[];
    if (Array.isArray(raw)) items = raw;
    else if (typeof raw === "string") items = raw.trim() === "" ? [] : raw.split(",").map((item) => item.trim());
    else return fail(name, source, "must be a list (JSON array, or comma-separated in the environment)", raw);
    const max = definition.max as number | undefined;
    if (max !== undefined && items.length > max) fail(name, source, `must have at most ${max} entries`);
    return items.map((item, index) => {
      if (typeof item !== "string" || item.length === 0) {
        return fail(name, source, `entry ${index} must be a non-empty string`, definition.secret ? undefined : item);
      }
      if (definition.pattern !== undefined && !definition.pattern.test(item)) {
        fail(name, source, `entry ${index} must be ${definition.patternHint ?? definition.pattern.source}`, item);
      }
      return item;
    });
  }

  const SHA256_PREFIX = "sha256:";

  function parseApiKeys(name: string, raw: unknown, source: Source): ApiKeyHash[] {
    return parseStringArray(name, raw, source).map((entry, index) => {
      if (entry.startsWith(SHA256_PREFIX)) {
        const hex = entry.slice(SHA256_PREFIX.length);
        if (!/^[0-9a-fA-F]{64}$/.test(hex)) fail(name, source, `entry ${index} must be 'sha256:' followed by 64 hex digits`);
        return Buffer.from(hex, "hex");
      }
      if (entry.length < 16) fail(name, source, `entry ${index} must be at least 16 characters long`);
      return hashApiKey(entry);
    });
  }

  function parsePemList(name: string, raw: unknown, source: Source, baseDir: string): string[] {
    // Comma-splitting PEM text in the environment would break it: there, entries are file paths.
    return parseStringArray(name, raw, source).map((entry, index) => {
      const pem = entry.includes("-----BEGIN") ? entry : readPemFile(name, source, resolvePath(baseDir, entry), index);
      if (!/-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----/.test(pem)) {
        fail(name, source, `entry ${index} is not a PEM certificate`);
      }
      return pem;
    });
  }

  function readPemFile(name: string, source: Source, path: string, index: number): string {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return fail(name, source, `entry ${index}: cannot read PEM file ${path}`);
    }
  }

  function parseMap(name: string, raw: unknown, source: Source): Record<string, string> {
    const definition = definitionOf(name);
    let value = raw;
    if (typeof raw === "string") {
      try {
        value = raw.trim() === "" ? {} : (JSON.parse(raw) as unknown);
      } catch {
        return fail(name, source, "must be a JSON object");
      }
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) return fail(name, source, "must be a JSON object", raw);
    const entries = Object.entries(value as Record<string, unknown>);
    const max = definition.max as number | undefined;
    if (max !== undefined && entries.length > max) fail(name, source, `must have at most ${max} entries`);
    const result: Record<string, string> = Object.create(null) as Record<string, string>;
    for (const [key, entry] of entries) {
      if (key.length === 0 || key.length > 256) fail(name, source, "keys must be 1..256 characters");
      if (typeof entry !== "string" || entry.length === 0) fail(name, source, `entry ${JSON.stringify(key)} must be a non-empty string`);
      if (definition.pattern !== undefined && !definition.pattern.test(entry)) {
        fail(name, source, `entry ${JSON.stringify(key)} must be ${definition.patternHint ?? definition.pattern.source}`, entry);
      }
      result[key] = entry;
    }
    return result;
  }

  function resolvePath(baseDir: string, path: string): string {
    return isAbsolute(path) ? path : resolve(baseDir, path);
  }

  function parseSetting(name: string, raw: unknown, source: Source, baseDir: string): SettingKinds[SettingKind] {
    const definition = definitionOf(name);
    switch (definition.kind) {
      case "string":
      case "choice":
        return parseString(name, raw, source);
      case "path":
        return resolvePath(baseDir, parseString(name, raw, source));
      case "integer":
        return parseInteger(name, raw, source);
      case "ns":
        return parseNs(name, raw, source);
      case "boolean":
        return parseBoolean(name, raw, source);
      case "list":
        return parseStringArray(name, raw, source);
      case "pemList":
        return parsePemList(name, raw, source, baseDir);
      case "apiKeyList":
        return parseApiKeys(name, raw, source);
      case "map":
        return parseMap(name, raw, source);
    }
  }



  function readConfigFile(file: string): Record<string, unknown> {
    if (!existsSync(file)) {
      throw new ValidationError("config.file", `config file ${file} does not exist`, { file });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(file, "utf8")) as unknown;
    } catch (cause) {
      throw new ValidationError("config.file", `config file ${file} is not valid JSON`, { file }, { cause });
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new ValidationError("config.file", `config file ${file} must hold a JSON object`, { file });
    }
    const object = parsed as Record<string, unknown>;
    const unknownKeys = Object.keys(object).filter((key) => !(key in table) && key !== "$schema" && key !== "//");
    if (unknownKeys.length > 0) {
      throw new ValidationError("config.file", `config file ${file} has unknown settings: ${unknownKeys.join(", ")}`, {
        file,
        unknownKeys,
      });
    }
    return object;
  }

  /**
   * Loads and validates the configuration: defaults, then the file, then the environment, then `overrides`.
   * Throws ValidationError (field `config.<name>`) naming the setting, its source, its env variable and the bound.
   */
  function load(options: LoadSettingsOptions = {}): SettingValues<T> {
    const env = options.env ?? process.env;
    const cwd = options.cwd ?? process.cwd();
    const fileValues = options.file === undefined ? {} : readConfigFile(options.file);
    const fileDir = options.file === undefined ? cwd : dirname(resolve(cwd, options.file));
    const result: Record<string, SettingKinds[SettingKind]> = {};

    for (const name of names) {
      const definition = definitionOf(name);
      const override = options.overrides?.[name];
      const envValue = readEnv(name, env, cwd);
      let value: SettingKinds[SettingKind];
      if (override !== undefined) {
        value = parseSetting(name, override, { kind: "override" }, cwd);
      } else if (envValue !== undefined) {
        value = envValue;
      } else if (name in fileValues) {
        value = parseSetting(name, fileValues[name], { kind: "file", file: options.file ?? "" }, fileDir);
      } else {
        // An empty path default means "not set" (tlsCertFile, tlsKeyFile) and stays empty.
        value = definition.kind === "path" && definition.default !== "" ? resolvePath(cwd, definition.default as string) : definition.default;
      }
      result[name] = value;
    }
    const values = result as unknown as SettingValues<T>;
    rules?.checkCrossFieldRules?.(values, (name, message, value) => fail(name, { kind: "override" }, message, value));
    return Object.freeze(values);
  }

  /**
   * A setting's value from the environment: its variable or one of its aliases (empty = not set), parsed. Two of
   * them set to different values are refused, naming both (a secret's values are not shown).
   */
  function readEnv(name: string, env: NodeJS.ProcessEnv, cwd: string): SettingKinds[SettingKind] | undefined {
    const definition = definitionOf(name);
    let found: { variable: string; raw: string; value: SettingKinds[SettingKind] } | undefined;
    for (const variable of [definition.env, ...(definition.envAliases ?? [])]) {
      const raw = env[variable];
      if (raw === undefined || raw === "") continue;
      const value = parseSetting(name, raw, { kind: "env", variable }, cwd);
      if (found === undefined) {
        found = { variable, raw, value };
      } else if (comparableValue(found.value) !== comparableValue(value)) {
        const shown = (variable: string, raw: string) => (definition.secret ? variable : `${variable}=${preview(raw)}`);
        throw new ValidationError(
          `config.${name}`,
          `${shown(found.variable, found.raw)} and ${shown(variable, raw)} are both set and differ; they name the same setting: set only one`,
          { setting: name, env: [found.variable, variable] },
        );
      }
    }
    return found?.value;
  }

  function comparableValue(value: SettingKinds[SettingKind]): string {
    return JSON.stringify(value, (_key, item: unknown) => (typeof item === "bigint" ? item.toString() : item));
  }


  /** A JSON-safe view of the configuration for logs: secrets hidden, ns as decimal strings, PEMs counted. */
  function redact(config: SettingValues<T>): Record<string, unknown> {
    const view: Record<string, unknown> = {};
    for (const name of names) {
      const definition = definitionOf(name);
      const value = config[name] as unknown as SettingKinds[SettingKind];
      if (definition.secret) {
        view[name] = Array.isArray(value) ? `[redacted: ${value.length} entries]` : value === "" ? "" : "[redacted]";
      } else if (typeof value === "bigint") {
        view[name] = value.toString();
      } else if (definition.kind === "pemList") {
        view[name] = `[${(value as readonly string[]).length} PEM certificates]`;
      } else {
        view[name] = value;
      }
    }
    return view;
  }

  return { table, names, describe, load, redact };
}
