// The chat panel's HTML shell: the same one in VS Code's webview and in the
// browser test. Scripts run only with the nonce; nothing loads from the
// network.

export interface Shell {
  /** The webview's `cspSource` (VS Code) or the page's origin (tests). */
  cspSource: string;
  nonce: string;
  scriptUri: string;
  styleUri: string;
}

export function chatHtml(shell: Shell): string {
  const csp = [
    "default-src 'none'",
    `style-src ${shell.cspSource}`,
    `img-src ${shell.cspSource} data:`,
    `script-src 'nonce-${shell.nonce}'`,
  ].join("; ");
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${shell.styleUri}">
<title>dsh</title>
</head>
<body>
<div id="header"></div>
<div id="log" role="log" aria-live="polite"></div>
<div id="question"></div>
<div id="pending" aria-live="polite"></div>
<div id="composer">
<textarea id="input" placeholder="Ask dsh… (Enter sends, Shift+Enter for a new line; while dsh works, Enter queues and Ctrl+Enter steers)"></textarea>
<button id="send">Send</button>
<button id="steer" hidden title="Send into the running turn: dsh reads it at its next step (Ctrl+Enter)">Steer</button>
<button id="cancel" hidden>Cancel</button>
</div>
<script nonce="${shell.nonce}" src="${shell.scriptUri}"></script>
</body>
</html>`;
}

/** A random nonce for the script tag. */
export function nonce(): string {
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let out = "";
  for (let i = 0; i < 32; i++) out += chars[Math.floor(Math.random() * chars.length)];
  return out;
}
