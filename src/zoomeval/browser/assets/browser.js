// zoomeval image browser: filters and sorts the images of a scored dataset from its index, then loads the page
// shards of the images it shows. Data files are scripts that call zoomBrowser.* (a page opened from file:// may
// load scripts, not fetch JSON). The state lives in the URL's hash, so a view can be bookmarked.
"use strict";
(function () {
  const CELL = 4; // heat-map cell, in canvas pixels
  const SOLVED = "#1b7f5f";
  const UNSOLVED = "#e4e4e4";
  const B = {};
  window.zoomBrowser = B;
  let classNames = [];
  let catalogue = { datasets: [] };
  const indexes = {};
  const shards = {};
  const loading = {};
  const state = { dataset: "", model: "", origin: "", filter: "all", sort: "order", page: 0 };

  B.classes = (names) => { classNames = names; };
  B.catalogue = (doc) => { catalogue = doc; };
  B.index = (doc) => { indexes[doc.name] = doc; };
  B.page = (name, k, images) => { shards[name + "/" + k] = images; };

  // Each filter: [key, label, predicate over an image's summary, variant it needs].
  const FILTERS = [
    ["all", "all images", () => true, null],
    ["solved", "solved by some transform", (s) => s.original.n > 0, null],
    ["unsolved", "unsolved by every transform", (s) => s.original.n === 0, null],
    ["zoom_in", "solved only by zoom-in (S > 224)", (s) => s.original.inOnly, null],
    ["zoom_out", "solved only by zoom-out (S < 224)", (s) => s.original.outOnly, null],
    ["background_needed", "background needed: solved, not on FGSet",
      (s) => s.original.n > 0 && s.fgset.n === 0, "fgset"],
    ["background_hurts", "background hurts: solved on FGSet only",
      (s) => s.fgset.n > 0 && s.original.n === 0, "fgset"],
  ];
  const SORTS = [
    ["order", "dataset order"],
    ["fewest", "fewest solving transforms first"],
    ["most", "most solving transforms first"],
  ];

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children || []) node.append(child);
    return node;
  }

  function loadScript(src) {
    if (!loading[src]) {
      loading[src] = new Promise((resolve, reject) => {
        const script = el("script", { src: src });
        script.onload = () => resolve();
        script.onerror = () => reject(new Error("cannot load " + src + " (was the browser built completely?)"));
        document.head.append(script);
      });
    }
    return loading[src];
  }

  const pad = (n, width) => String(n).padStart(width, "0");
  const shortName = (label) => (classNames[label] || "class " + label).split(",")[0];

  function transformOf(index, t) {
    const n = index.scales.length;
    const anchor = Math.floor(t / n);
    return { scale: index.scales[t % n], row: Math.floor(anchor / 3), col: anchor % 3 };
  }
  function transformName(index, t) {
    const x = transformOf(index, t);
    return "LOC:" + x.row + "_" + x.col + "_Size:" + x.scale;
  }

  // Per variant: transforms that solve image k (summed over the models in scope), and whether all of them are
  // zoom-in (S > 224) or all zoom-out (S < 224).
  function summary(index, models, k) {
    const out = {};
    index.variants.forEach((variant, v) => {
      let n = 0, inOnly = true, outOnly = true;
      for (const m of models) {
        const code = index.codes[m][v][k];
        const count = code >> 2;
        n += count;
        if (count > 0) {
          inOnly = inOnly && (code & 1) === 1;
          outOnly = outOnly && (code & 2) === 2;
        }
      }
      out[variant] = { n: n, inOnly: n > 0 && inOnly, outOnly: n > 0 && outOnly };
    });
    return out;
  }

  function modelsInScope(index) {
    const m = index.models.indexOf(state.model);
    return m >= 0 ? [m] : index.models.map((_, i) => i);
  }

  function selection(index) {
    const models = modelsInScope(index);
    const filter = FILTERS.find((f) => f[0] === state.filter) || FILTERS[0];
    const origin = index.origins.indexOf(state.origin);
    const picked = [];
    for (let k = 0; k < index.n_images; k++) {
      if (origin >= 0 && index.origin[k] !== origin) continue;
      const s = summary(index, models, k);
      if (filter[2](s)) picked.push([k, s.original.n]);
    }
    if (state.sort === "fewest") picked.sort((a, b) => a[1] - b[1] || a[0] - b[0]);
    if (state.sort === "most") picked.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
    return picked.map((p) => p[0]);
  }

  function fillSelect(id, options, value) {
    const select = document.getElementById(id);
    select.replaceChildren(...options.map(([key, label, disabled]) => {
      const option = el("option", { value: key, text: label });
      if (disabled) option.disabled = true;
      return option;
    }));
    select.value = options.some((o) => o[0] === value && !o[2]) ? value : options[0][0];
    return select.value;
  }

  function fillControls(index) {
    state.dataset = fillSelect("dataset", catalogue.datasets.map((d) => [d.name, d.name]), state.dataset);
    state.model = fillSelect("model", [["", "all models"], ...index.models.map((m) => [m, m])], state.model);
    state.origin = fillSelect("origin", [["", "all origins"], ...index.origins.map((o) => [o, o])], state.origin);
    state.filter = fillSelect("filter", FILTERS.map(([key, label, , needs]) =>
      [key, needs && !index.variants.includes(needs) ? label + " (no " + needs + " here)" : label,
        needs && !index.variants.includes(needs)]), state.filter);
    state.sort = fillSelect("sort", SORTS, state.sort);
  }

  function drawHeat(canvas, index, bits) {
    const bytes = atob(bits);
    const ranked = index.scales.slice().sort((a, b) => a - b);
    const column = index.scales.map((s) => ranked.indexOf(s));
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = UNSOLVED;
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = SOLVED;
    const n = index.scales.length;
    for (let t = 0; t < 9 * n; t++) {
      if ((bytes.charCodeAt(t >> 3) >> (7 - (t & 7))) & 1) {
        ctx.fillRect(column[t % n] * CELL, Math.floor(t / n) * CELL, CELL, CELL);
      }
    }
    canvas.addEventListener("mousemove", (event) => {
      const x = Math.floor(event.offsetX / CELL), y = Math.floor(event.offsetY / CELL);
      const s = column.indexOf(x);
      if (s < 0 || y > 8) return;
      const t = y * n + s;
      const solved = (bytes.charCodeAt(t >> 3) >> (7 - (t & 7))) & 1;
      canvas.title = transformName(index, t) + (solved ? ": solved" : ": not solved");
    });
  }

  function thumbnail(index, image) {
    const [w, h] = image.size;
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.setAttribute("preserveAspectRatio", "none");
    for (const [x0, y0, x1, y1] of image.boxes) {
      const rect = document.createElementNS("http://www.w3.org/2000/svg", "rect");
      for (const [key, value] of Object.entries({ x: x0, y: y0, width: x1 - x0, height: y1 - y0 })) {
        rect.setAttribute(key, value);
      }
      svg.append(rect);
    }
    const img = el("img", { src: index.thumbnails + pad(image.i, 6) + ".jpg", alt: image.id, loading: "lazy" });
    return el("div", { class: "thumb", style: "aspect-ratio: " + w + " / " + h }, [img, svg]);
  }

  function modelBlock(index, image, m, k) {
    const model = index.models[m];
    const detail = image.models[m];
    const labels = new Set(image.labels);
    const orig = index.variants.indexOf("original");
    const solvedBy = index.codes[m][orig][k] >> 2;
    const total = 9 * index.scales.length;
    const one = detail.preds.find(([t]) => t === index.one_crop);
    const head = [el("strong", { text: model }), " · solved by " + solvedBy + " of " + total + " transforms"];
    if (one) {
      head.push(" · 1-crop: ", el("span", { class: labels.has(one[1]) ? "hit" : "miss", title: classNames[one[1]] || "",
        text: shortName(one[1]) + (labels.has(one[1]) ? " ✓" : " ✗") }));
    }
    const heats = index.variants.map((variant, v) => {
      const canvas = el("canvas", { width: index.scales.length * CELL, height: 9 * CELL, "data-model": model,
        "data-variant": variant, "data-image": image.id });
      drawHeat(canvas, index, image.heat[m][v]);
      return el("figure", {}, [canvas, el("figcaption", { text: variant })]);
    });
    const first = detail.first >= 0
      ? el("figure", { class: "crop" }, [
        el("img", { src: index.crops + pad(image.i, 6) + "_" + model + ".jpg", alt: "crop", loading: "lazy" }),
        el("figcaption", { text: "first solving: " + transformName(index, detail.first) })])
      : el("figure", { class: "crop none" }, [el("figcaption", { text: "no transform solves it" })]);
    const role = (t) => [t === index.one_crop ? "1-crop" : "",
      index.greedy[m].includes(t) ? "greedy #" + (index.greedy[m].indexOf(t) + 1) : ""].filter(Boolean).join(" = ");
    const preds = el("ul", { class: "preds" }, detail.preds.map(([t, pred]) => el("li", {}, [
      role(t) + " " + transformName(index, t) + ": ",
      el("span", { class: labels.has(pred) ? "hit" : "miss", title: classNames[pred] || "", text: shortName(pred) }),
    ])));
    return el("section", { class: "model" }, [el("p", { class: "head" }, head),
      el("div", { class: "row" }, [el("div", { class: "heats" }, heats), first]), preds]);
  }

  function card(index, image, k, models) {
    const solved = summary(index, index.models.map((_, i) => i), k).original.n > 0;
    const info = el("div", { class: "info" }, [
      el("h2", { text: image.id }),
      el("p", { class: "labels" }, ["labels: ", ...image.labels.flatMap((l, j) =>
        [j ? ", " : "", el("span", { title: classNames[l] || "", text: shortName(l) })])]),
      el("p", { text: "origin: " + index.origins[index.origin[k]] + " · " + image.size[0] + "×" + image.size[1] }),
      el("p", { class: solved ? "hit" : "miss", text: solved ? "some transform solves it" : "no transform of any model solves it" }),
    ]);
    return el("article", { class: "card", "data-image": image.id }, [
      el("div", { class: "top" }, [thumbnail(index, image), info]),
      ...models.map((m) => modelBlock(index, image, m, k)),
    ]);
  }

  function writeHash() {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(state)) params.set(key, value);
    history.replaceState(null, "", "#" + params.toString());
  }

  function readHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    for (const key of Object.keys(state)) {
      if (params.has(key)) state[key] = key === "page" ? Math.max(0, parseInt(params.get(key), 10) || 0) : params.get(key);
    }
  }

  async function render() {
    document.body.dataset.ready = "0";
    const status = document.getElementById("status");
    const cards = document.getElementById("cards");
    try {
      if (!catalogue.datasets.length) throw new Error("no datasets in catalogue.js");
      if (!catalogue.datasets.some((d) => d.name === state.dataset)) state.dataset = catalogue.datasets[0].name;
      const name = state.dataset;
      await loadScript("data/" + name + "/index.js");
      const index = indexes[name];
      fillControls(index);
      const picked = selection(index);
      const pages = Math.max(1, Math.ceil(picked.length / index.page_size));
      state.page = Math.min(state.page, pages - 1);
      const shown = picked.slice(state.page * index.page_size, (state.page + 1) * index.page_size);
      const needed = [...new Set(shown.map((k) => Math.floor(k / index.shard_images)))];
      await Promise.all(needed.map((s) => loadScript("data/" + name + "/pages/" + pad(s, 5) + ".js")));
      const models = modelsInScope(index);
      cards.replaceChildren(...shown.map((k) =>
        card(index, shards[name + "/" + Math.floor(k / index.shard_images)][k % index.shard_images], k, models)));
      status.textContent = picked.length + " of " + index.n_images + " images · page " + (state.page + 1) + " of " +
        pages + " · left out of " + index.dataset + ": " + index.left_out.why;
      document.getElementById("prev").disabled = state.page === 0;
      document.getElementById("next").disabled = state.page >= pages - 1;
      writeHash();
    } catch (error) {
      status.textContent = String(error.message || error);
      cards.replaceChildren();
    }
    document.body.dataset.ready = "1";
  }

  document.addEventListener("DOMContentLoaded", () => {
    readHash();
    for (const id of ["dataset", "model", "origin", "filter", "sort"]) {
      document.getElementById(id).addEventListener("change", (event) => {
        state[id] = event.target.value;
        state.page = 0;
        render();
      });
    }
    document.getElementById("prev").addEventListener("click", () => { state.page -= 1; render(); });
    document.getElementById("next").addEventListener("click", () => { state.page += 1; render(); });
    window.addEventListener("hashchange", () => { readHash(); render(); });
    render();
  });
})();
