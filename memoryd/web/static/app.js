// memoryd ui: the little script the pages need. No inline script anywhere (CSP: script-src 'self').
"use strict";

function pick(obj, dotted) {
  return dotted.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

function shown(value) {
  if (value === null || value === undefined || value === "") return "-";
  if (typeof value === "number") return value.toLocaleString("en-US");
  return String(value);
}

// The dashboard's figures stay live: re-read /api/status and update each [data-field] as text.
function refreshLive(section) {
  const url = section.getAttribute("data-refresh");
  const tick = async () => {
    try {
      const resp = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      if (!resp.ok) return;
      const snap = await resp.json();
      section.querySelectorAll("[data-field]").forEach((el) => {
        const value = pick(snap, el.getAttribute("data-field"));
        if (value !== undefined) el.textContent = shown(value);
      });
      section.setAttribute("data-updated", new Date().toISOString());
    } catch (err) {
      // the server went away (ui stopped); keep the last figures
    }
  };
  setInterval(tick, 5000);
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach(refreshLive);
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (ev) => {
      if (!window.confirm(form.getAttribute("data-confirm"))) ev.preventDefault();
    });
  });
});
