/** The protocol package: the one TypeScript implementation of the Attested Time wire format (PROTOCOL.md). */
export * from "./constants";
export * from "./types";
export * from "./errors";
export * from "./codec";
export * from "./keys";
export * from "./secp256k1";
export * from "./keccak";
export * from "./sign";
export * from "./verify";
export * from "./devca";
export * from "./json";
export * from "./certs";
export * from "./keystore";
export * from "./devkeys";
