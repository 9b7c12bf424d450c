/**
 * Small modules with one job (issue 27): a TypeScript or JavaScript source over MAX_LINES lines, outside tests and
 * generated code, must say in its header comment why it stays one file, in a sentence starting with MARKER. A file
 * that grows past the bound without one fails here: split its second job out, or write down why there is none.
 * Solidity is left out: a contract's comments are part of its metadata hash, so its bytecode (abi/) would move.
 * A header says the file's one job in at most MAX_HEADER_LINES lines and points to the docs/ section with the
 * detail: invariants live in names, types, tests and the spec, not in long prose at the top of a file.
 */
import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..");
const MAX_LINES = 500;
const MARKER = "Why one file:";
const MAX_HEADER_LINES = 15;
/** The program and library folders whose headers are bounded (scripts/ and tests are not). */
const HEADER_FOLDERS = /^(node|gateway|relayer|lib|wire|protocol|client|upgrade|catalog|deploy|testing)\//;
/** Tests, and code generated from other sources (abi/ from the artifacts). */
const NOT_SOURCE = [/^test\//, /^test-system\//, /^examples\/[^/]+\/test\//, /\.test\.ts$/, /^abi\//];

/** The header: the file's first block comment, when only comments, a shebang or "use strict" precede it. */
function header(text: string): string {
  const start = text.indexOf("/**");
  if (start === -1) return "";
  const code = text
    .slice(0, start)
    .split("\n")
    .filter((line) => line.trim() !== "" && !/^(\/\/|#!|"use strict")/.test(line.trim()));
  return code.length > 0 ? "" : text.slice(start, text.indexOf("*/", start) + 2);
}

function sources(): string[] {
  const files = execFileSync("git", ["ls-files", "*.ts", "*.js"], { cwd: ROOT, encoding: "utf8" })
    .split("\n")
    .filter((file) => file !== "" && !NOT_SOURCE.some((pattern) => pattern.test(file)));
  expect(files.length, "git ls-files found the sources").to.be.greaterThan(100);
  return files;
}

describe(`source files over ${MAX_LINES} lines (test/lint/fileSize.test.ts)`, () => {
  it(`say "${MARKER} …" in their header`, () => {
    const files = sources();
    const unexplained = files.filter((file) => {
      const text = readFileSync(join(ROOT, file), "utf8");
      return text.split("\n").length > MAX_LINES && !header(text).includes(MARKER);
    });
    expect(unexplained, `over ${MAX_LINES} lines without "${MARKER}" in the header`).to.deep.equal([]);
  });

  it(`have a header of at most ${MAX_HEADER_LINES} lines (the detail is in docs/)`, () => {
    const files = sources().filter((file) => HEADER_FOLDERS.test(file));
    expect(files.length, "the program and library folders hold sources").to.be.greaterThan(100);
    const long = files
      .map((file) => ({ file, lines: header(readFileSync(join(ROOT, file), "utf8")).split("\n").length }))
      .filter(({ lines }) => lines > MAX_HEADER_LINES)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    expect(long, `headers over ${MAX_HEADER_LINES} lines: say the file's job and point to docs/`).to.deep.equal([]);
  });

  it("reads a header only at the top of a file", () => {
    expect(header(`"use strict";\n/**\n * Why one file: x\n */\nexport {};\n`)).to.contain(MARKER);
    expect(header(`import { a } from "b";\n/**\n * Why one file: x\n */\n`)).to.equal("");
    expect(header(`#!/usr/bin/env node\n/**\n * a\n * b\n */\nexport {};\n`).split("\n")).to.have.length(4);
  });
});
