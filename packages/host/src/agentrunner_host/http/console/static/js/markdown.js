// Markdown for runner output, rendered so nothing a runner sends can run or fetch from another host:
// - raw HTML is off (markdown-it escapes it: `<script>` arrives as text);
// - links keep only http(s), mailto and same-origin relative targets; anything else (javascript:, data:,
//   vbscript:, file:) is not turned into a link at all;
// - images become plain links (an <img> pointing elsewhere would make the browser fetch from that host),
//   except same-origin ones;
// - the page's Content-Security-Policy refuses inline script and foreign hosts as a second line.
import markdownit from "../vendor/markdown-it/markdown-it.js";

const SAFE_SCHEMES = /^(https?:|mailto:)/i;

export function safeHref(url) {
  const value = String(url).trim();
  if (SAFE_SCHEMES.test(value)) return true;
  // relative to this server: "/x", "#x", "x" — but not "//host" (scheme-relative) and no scheme at all
  if (value.startsWith("//")) return false;
  return !/^[a-z][a-z0-9+.-]*:/i.test(value);
}

function sameOrigin(url) {
  const value = String(url).trim();
  return value.startsWith("/") && !value.startsWith("//");
}

const md = markdownit({ html: false, linkify: false, typographer: false, breaks: true });
md.validateLink = safeHref;

const defaultLinkOpen = md.renderer.rules.link_open || ((tokens, idx, options, env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx].attrSet("rel", "noopener noreferrer nofollow");
  return defaultLinkOpen(tokens, idx, options, env, self);
};
md.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  const src = token.attrGet("src") || "";
  const alt = self.renderInlineAsText(token.children || [], options, env) || src;
  if (sameOrigin(src)) return self.renderToken(tokens, idx, options).replace("<img", '<img class="attachment"');
  return `<a href="${md.utils.escapeHtml(src)}" rel="noopener noreferrer nofollow">${md.utils.escapeHtml(alt)}</a>`;
};

// Markdown source → sanitized HTML string (safe to assign to innerHTML).
export function renderMarkdown(text) {
  return md.render(String(text ?? ""));
}
