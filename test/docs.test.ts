/**
 * The specification lives in the repository (docs/protocol.md), and the code cites it by section. This test keeps
 * both true: no source or document may point at a specification or a path outside the repository (a clone could
 * not follow it), and every `docs/protocol.md §n` citation must name a section that exists.
 */
import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join } from "node:path";

const ROOT = join(__dirname, "..");
const SPEC = "docs/protocol.md";
const ARCHITECTURE = "docs/architecture.md";

/** The file kinds that carry code comments or prose: sources, contracts, documents, schemas, data with notes. */
const CHECKED_EXTENSIONS = new Set([".ts", ".sol", ".md", ".js", ".cjs", ".mjs", ".json", ".proto", ".yml", ".yaml"]);
/** Build output and dependencies, skipped when git is not available to tell ignored files apart. */
const SKIPPED_DIRECTORIES = /^(?:node_modules|\.git|artifacts.*|cache.*|dist|coverage|typechain-types|\.ats|keys|data)$/;

/**
 * References that lead outside the repository. The names are assembled from parts so that this file does not
 * contain them itself.
 */
const FORBIDDEN: readonly { what: string; pattern: RegExp }[] = [
  { what: "the former specification file outside the repository", pattern: new RegExp(["PROTOCOL", "\\.md"].join("")) },
  { what: "a planning file outside the repository", pattern: new RegExp(["PLAN", "\\.md"].join("")) },
  { what: "a style guide outside the repository", pattern: new RegExp(["STYLE", "\\.md"].join("")) },
  { what: "a path into the shared workspace", pattern: new RegExp(["\\.\\./", "shared\\b"].join("")) },
  { what: "an absolute path into the shared workspace", pattern: new RegExp(["/work/", "shared\\b"].join("")) },
];

/** Tracked and untracked-but-not-ignored files (git), else a walk of the tree without build output. */
function repositoryFiles(): string[] {
  let files: string[];
  try {
    const listing = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
      cwd: ROOT,
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
      stdio: ["ignore", "pipe", "ignore"],
    });
    files = listing.split("\0").filter((file) => file !== "");
  } catch {
    files = [];
    const walk = (directory: string): void => {
      for (const entry of readdirSync(join(ROOT, directory), { withFileTypes: true })) {
        const path = directory === "" ? entry.name : `${directory}/${entry.name}`;
        if (entry.isDirectory()) {
          if (!SKIPPED_DIRECTORIES.test(entry.name)) walk(path);
        } else if (entry.isFile()) {
          files.push(path);
        }
      }
    };
    walk("");
  }
  return [...new Set(files)]
    .filter((file) => CHECKED_EXTENSIONS.has(extname(file)))
    .filter((file) => existsSync(join(ROOT, file)) && statSync(join(ROOT, file)).isFile())
    .sort();
}

/** The section numbers of docs/protocol.md: headings that start with `§n` or `§n.m` (any heading level). */
function specSections(text: string): string[] {
  const sections: string[] = [];
  for (const match of text.matchAll(/^#{1,6}\s+§(\d+(?:\.\d+)*)(?=[\s.:]|$)/gm)) sections.push(match[1]!);
  return sections;
}

/**
 * Expands a run of section references such as `§3–§5, §10` or `§1, §9.1`: every named section, and for a range of
 * whole sections (`§3–§5`) every section in between.
 */
function referencedSections(run: string): string[] {
  const sections: string[] = [];
  for (const part of run.matchAll(/§(\d+(?:\.\d+)*)(?:\s*[–—-]\s*§(\d+(?:\.\d+)*))?/g)) {
    const [, from, to] = part;
    sections.push(from!);
    if (to === undefined) continue;
    sections.push(to);
    if (/^\d+$/.test(from!) && /^\d+$/.test(to)) {
      for (let n = Number(from) + 1; n < Number(to); n += 1) sections.push(String(n));
    }
  }
  return sections;
}

/** `docs/protocol.md` followed by one or more § references, joined by commas, dashes, "and" or "or". */
const CITATION = /docs\/protocol\.md((?:\s*(?:,|[–—-]|and|or)?\s*§\d+(?:\.\d+)*)+)/g;

interface Finding {
  file: string;
  line: number;
  text: string;
}

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i += 1) if (text.charCodeAt(i) === 10) line += 1;
  return line;
}

function describeFindings(findings: readonly Finding[]): string {
  return findings.map((finding) => `${finding.file}:${finding.line}: ${finding.text}`).join("\n");
}

describe("docs: the specification lives in the repository", function () {
  const files = repositoryFiles();
  const spec = readFileSync(join(ROOT, SPEC), "utf8");
  const sections = specSections(spec);
  const known = new Set(sections);

  it("docs/protocol.md numbers its sections once each, and docs/architecture.md exists", () => {
    expect(sections.length, "numbered headings (## §n …) in docs/protocol.md").to.be.greaterThan(10);
    const duplicates = sections.filter((section, index) => sections.indexOf(section) !== index);
    expect(duplicates, "section numbers used twice in docs/protocol.md").to.deep.equal([]);
    expect(existsSync(join(ROOT, ARCHITECTURE)), ARCHITECTURE).to.equal(true);
  });

  it("no source or document cites a specification or a path outside the repository", () => {
    expect(files.length, "files found").to.be.greaterThan(50);
    const findings: Finding[] = [];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), "utf8");
      for (const { what, pattern } of FORBIDDEN) {
        const global = new RegExp(pattern.source, "g");
        for (const match of text.matchAll(global)) {
          findings.push({ file, line: lineOf(text, match.index ?? 0), text: `${what} ("${match[0]}")` });
        }
      }
    }
    expect(findings, `cite docs/protocol.md §n instead:\n${describeFindings(findings)}`).to.deep.equal([]);
  });

  it("every docs/protocol.md §n citation names an existing section", () => {
    const findings: Finding[] = [];
    let citations = 0;
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), "utf8");
      for (const match of text.matchAll(CITATION)) {
        citations += 1;
        for (const section of referencedSections(match[1]!)) {
          if (!known.has(section)) findings.push({ file, line: lineOf(text, match.index ?? 0), text: `§${section} does not exist` });
        }
      }
    }
    expect(citations, "citations of docs/protocol.md found").to.be.greaterThan(20);
    expect(findings, `sections of ${SPEC}: ${sections.join(", ")}\n${describeFindings(findings)}`).to.deep.equal([]);
  });

  it("the cross-references inside docs/protocol.md and docs/architecture.md name existing sections", () => {
    const findings: Finding[] = [];
    for (const file of [SPEC, ARCHITECTURE]) {
      const text = readFileSync(join(ROOT, file), "utf8");
      // Headings define sections; every other § reference in these documents refers to docs/protocol.md.
      const body = text.replace(/^#{1,6}\s+§\d+(?:\.\d+)*/gm, (heading) => heading.replace(/§/g, ""));
      for (const match of body.matchAll(/§\d+(?:\.\d+)*(?:\s*[–—-]\s*§\d+(?:\.\d+)*)?/g)) {
        for (const section of referencedSections(match[0])) {
          if (!known.has(section)) findings.push({ file, line: lineOf(body, match.index ?? 0), text: `§${section} does not exist` });
        }
      }
    }
    expect(findings, describeFindings(findings)).to.deep.equal([]);
  });

  it("every docs/*.md a file mentions exists", () => {
    const findings: Finding[] = [];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), "utf8");
      for (const match of text.matchAll(/\bdocs\/([A-Za-z0-9_-]+\.md)\b/g)) {
        if (!existsSync(join(ROOT, "docs", match[1]!))) {
          findings.push({ file, line: lineOf(text, match.index ?? 0), text: `docs/${match[1]!} does not exist` });
        }
      }
    }
    expect(findings, describeFindings(findings)).to.deep.equal([]);
  });

  it("the README links both documents", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    expect(readme).to.contain(`](${SPEC})`);
    expect(readme).to.contain(`](${ARCHITECTURE})`);
  });
});
