// A virtual list: only the rows in view (plus a margin) exist in the DOM, so a table of
// 10,000 steps costs the same to draw as one of 30.

import { h } from "./util.js";

export function virtualList({ rowHeight = 34, maxHeight = 420, renderRow, className = "" }) {
  const inner = h("div", { class: "vinner" });
  const box = h("div", { class: `vlist ${className}` }, inner);
  let items = [];
  let drawn = "";
  const draw = (force) => {
    const top = box.scrollTop;
    const view = box.clientHeight || maxHeight;
    const first = Math.max(0, Math.floor(top / rowHeight) - 8);
    const last = Math.min(items.length, Math.ceil((top + view) / rowHeight) + 8);
    const key = `${first}:${last}`;
    if (!force && key === drawn) return;
    drawn = key;
    inner.textContent = "";
    for (let i = first; i < last; i++) {
      const row = h("div", { class: "vrow", style: `top:${i * rowHeight}px;height:${rowHeight}px` });
      renderRow(items[i], row, i);
      inner.append(row);
    }
  };
  box.addEventListener("scroll", () => draw(false), { passive: true });
  return {
    el: box,
    setItems(next) {
      items = next;
      inner.style.height = `${items.length * rowHeight}px`;
      box.style.height = `${Math.min(maxHeight, Math.max(items.length, 1) * rowHeight + 2)}px`;
      draw(true);
    },
    redraw() { draw(true); },
    get length() { return items.length; },
  };
}
