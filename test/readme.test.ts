/**
 * The README is the front door (issue 27): short, with the two commands a fresh clone must run verbatim, and links
 * that lead somewhere. Everything else lives in docs/, whose links are checked the same way (files and #anchors).
 */
import { expect } from "chai";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

const ROOT = join(__dirname, "..");
const README = join(ROOT, "README.md");
const MAX_README_LINES = 250;

/** Markdown files whose links are checked: the README, the top-level guides and every page of docs/. */
function documents(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => join(ROOT, "docs", name));
  return [README, join(ROOT, "CONTRIBUTING.md"), join(ROOT, "SECURITY.md"), join(ROOT, "CHANGELOG.md"), ...docs].filter((file) => existsSync(file));
}

/** The text with fenced code blocks blanked, line breaks kept (a link inside a code sample is not a link). */
function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ""));
}

/** GitHub's anchor of a heading: lower case, punctuation dropped (letters, digits, `-`, `_` and spaces kept), spaces → `-`. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** Every anchor a Markdown file defines, with GitHub's `-1`, `-2` … for repeated headings. */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const match of prose(readFileSync(file, "utf8")).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(match[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Relative links `[text](target)` of a Markdown file, with their line numbers. */
function relativeLinks(file: string): { line: number; target: string }[] {
  const text = prose(readFileSync(file, "utf8"));
  const links: { line: number; target: string }[] = [];
  for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = match[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …
    links.push({ line: text.slice(0, match.index).split("\n").length, target });
  }
  return links;
}

describe("README.md: the front door", () => {
  const readme = readFileSync(README, "utf8");

  it(`stays at most ${MAX_README_LINES} lines (details belong in docs/, changes in CHANGELOG.md)`, () => {
    const lines = readme.split("\n").length;
    expect(lines, `README.md has ${lines} lines`).to.be.at.most(MAX_README_LINES);
  });

  it("shows the two commands of a fresh clone verbatim, in separate blocks (pasting one does not start the other)", () => {
    const blocks = [...readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
    const start = blocks.findIndex((block) => /^npm install && npm start(\s|$)/m.test(block));
    const test = blocks.findIndex((block) => /^npm install && npm test(\s|$)/m.test(block));
    expect(start, "a ```sh block with `npm install && npm start`").to.be.at.least(0);
    expect(test, "a ```sh block with `npm install && npm test`").to.be.at.least(0);
    expect(start, "npm start and npm test in different blocks").to.not.equal(test);
    // The scripts they name exist.
    const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    expect(scripts).to.have.property("start");
    expect(scripts).to.have.property("test");
  });

  it("lists every npm script a user runs and every bin of the package", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string>; bin: Record<string, string> };
    // Lifecycle hooks run on their own; the rest is a command someone types.
    const lifecycle = new Set(["prepare", "pretest"]);
    const missing = Object.keys(pkg.scripts)
      .filter((name) => !lifecycle.has(name))
      .filter((name) => !(name === "start" || name === "test" ? readme.includes(`\`npm ${name}`) : readme.includes(`\`npm run ${name}`)));
    expect(missing, "npm scripts the README's command table does not name").to.deep.equal([]);
    const missingBins = Object.keys(pkg.bin).filter((name) => !readme.includes(`npx ${name} `));
    expect(missingBins, "bins the README's command table does not name").to.deep.equal([]);
  });

  it("links the specification, the architecture and every page of docs/", () => {
    const linked = new Set(relativeLinks(README).map(({ target }) => normalize(target.split("#")[0]!)));
    const pages = readdirSync(join(ROOT, "docs")).filter((name) => name.endsWith(".md"));
    const unlinked = pages.filter((name) => !linked.has(join("docs", name)));
    expect(unlinked, "docs/ pages the README does not link").to.deep.equal([]);
  });

  it("every relative link in README.md and docs/*.md leads to an existing file, and its #anchor to a heading there", () => {
    const findings: string[] = [];
    for (const file of documents()) {
      for (const { line, target } of relativeLinks(file)) {
        const [path, anchor] = target.split("#") as [string, string | undefined];
        const resolved = path === "" ? file : join(dirname(file), decodeURIComponent(path));
        const where = `${relative(ROOT, file)}:${line}: ${target}`;
        if (!existsSync(resolved)) {
          findings.push(`${where}: no such file`);
          continue;
        }
        if (anchor !== undefined && anchor !== "" && statSync(resolved).isFile() && resolved.endsWith(".md") && !anchorsOf(resolved).has(anchor)) {
          findings.push(`${where}: no heading with that anchor in ${relative(ROOT, resolved)}`);
        }
      }
    }
    expect(findings, findings.join("\n")).to.deep.equal([]);
  });
});
