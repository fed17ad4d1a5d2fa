// The page of `lulc view`: a run's class, confidence, area-of-applicability
// and labels COGs on an OpenLayers map in the rasters' own projected
// coordinates (no base map, nothing fetched from elsewhere), the scheme's
// legend and a pixel inspector that reads the COGs' values with geotiff.js.
//
// scripts/web bundles this file with OpenLayers and geotiff.js into
// bundle.js, which the lulc binary embeds. window.lulcView reports what
// the page did (for its headless test): ready, error, the tiles shown,
// inspect and measure.

import OLMap from 'ol/Map.js';
import View from 'ol/View.js';
import TileLayer from 'ol/layer/WebGLTile.js';
import LayerGroup from 'ol/layer/Group.js';
import GeoTIFF from 'ol/source/GeoTIFF.js';
import Projection from 'ol/proj/Projection.js';
import {addProjection, get as getProjection} from 'ol/proj.js';
import {defaults as defaultControls} from 'ol/control/defaults.js';
import ScaleLine from 'ol/control/ScaleLine.js';
import Overlay from 'ol/Overlay.js';
import {createEmpty, extend, containsCoordinate} from 'ol/extent.js';
import {fromUrl} from 'geotiff';
import 'ol/ol.css';

// The layers, bottom to top, and how each is drawn.
const KINDS = ['stack', 'labels', 'class', 'confidence', 'aoa'];

const report = {
  ready: false,
  error: null,
  tiles: [],
  shown: [],
  last: null,
};
window.lulcView = report;

const params = new URLSearchParams(location.search);
let run;
let view;
let map;
let labelsMap;
// markers show the inspected pixel on both maps.
const markers = [];
const groups = {};
const besideGroup = new LayerGroup();
// pixels counts, per kind, the pixels drawn in the last frame while
// measure asks for them.
let counting = null;

function $(id) {
  return document.getElementById(id);
}

function status(text, isError) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('error', !!isError);
}

function fail(err) {
  report.error = String(err && err.message ? err.message : err);
  status(report.error, true);
}

// hex turns #rrggbb into [r, g, b, 1].
function hex(c) {
  const v = parseInt(c.slice(1), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255, 1];
}

// palette is the class scheme as 256 colours by code: 0 (no data)
// transparent, codes outside the scheme grey.
function palette(classes) {
  const colors = new Array(256).fill([128, 128, 128, 1]);
  colors[0] = [0, 0, 0, 0];
  for (const c of classes) {
    if (c.value > 0 && c.value < 256) {
      colors[c.value] = hex(c.color);
    }
  }
  return colors;
}

function className(classes, value) {
  const c = classes.find((c) => c.value === value);
  return c ? c.name : 'not in the scheme';
}

// style returns the WebGL style of a layer kind for a tile.
function style(kind, tile) {
  switch (kind) {
    case 'class':
    case 'labels':
      return {color: ['palette', ['band', 1], palette(tile.classes)]};
    case 'confidence':
      return {
        color: [
          'case',
          ['==', ['band', 1], 0],
          [0, 0, 0, 0],
          ['interpolate', ['linear'], ['band', 1], 0, [215, 48, 39, 1], 50, [254, 224, 139, 1], 100, [26, 152, 80, 1]],
        ],
      };
    case 'aoa':
      // Band 2 is the mask: 1 inside the area of applicability, 0
      // outside; no data (NaN) is neither.
      return {color: ['case', ['==', ['band', 2], 0], [200, 0, 200, 0.65], [0, 0, 0, 0]]};
    case 'stack': {
      // Reflectance stretched from 0 to 0.3.
      const {scale, offset} = tile.rgb;
      const chan = (b) => ['clamp', ['*', ['+', ['*', ['band', b], scale], offset], 850], 0, 255];
      return {color: ['case', ['==', ['band', 1], 0], [0, 0, 0, 0], ['color', chan(1), chan(2), chan(3), 1]]};
    }
  }
  throw new Error('unknown layer ' + kind);
}

function source(kind, tile) {
  const info = {url: tile.layers[kind]};
  if (kind === 'stack') {
    info.bands = tile.rgb.bands;
  }
  return new GeoTIFF({sources: [info], normalize: false, interpolate: false, transition: 0});
}

function layer(kind, tile) {
  const l = new TileLayer({
    source: source(kind, tile),
    style: style(kind, tile),
    className: 'ol-layer lulc-' + kind,
  });
  l.on('postrender', (e) => {
    if (!counting) {
      return;
    }
    const gl = e.context;
    const w = gl.drawingBufferWidth;
    const h = gl.drawingBufferHeight;
    const px = new Uint8Array(w * h * 4);
    gl.readPixels(0, 0, w, h, gl.RGBA, gl.UNSIGNED_BYTE, px);
    let n = 0;
    for (let i = 3; i < px.length; i += 4) {
      if (px[i] > 0) {
        n++;
      }
    }
    // Tiles of one kind share a canvas: the last one's count holds all.
    counting[kind] = Math.max(counting[kind] || 0, n);
  });
  return l;
}

// The COGs' first images, for the inspector, by URL.
const images = new Map();

function image(url) {
  if (!images.has(url)) {
    images.set(url, fromUrl(url).then((t) => t.getImage(0)));
  }
  return images.get(url);
}

// valueAt reads the pixel of url's full-resolution image at (x, y).
async function valueAt(url, x, y) {
  const img = await image(url);
  const [ox, oy] = img.getOrigin();
  const [rx, ry] = img.getResolution();
  const col = Math.floor((x - ox) / rx);
  const row = Math.floor((y - oy) / ry);
  if (col < 0 || row < 0 || col >= img.getWidth() || row >= img.getHeight()) {
    return null;
  }
  const bands = await img.readRasters({window: [col, row, col + 1, row + 1]});
  return {col, row, values: Array.from(bands, (b) => b[0])};
}

// inspect reads every layer of the tile under coordinate and shows them.
async function inspect(coordinate) {
  const [x, y] = coordinate;
  // Where tiles overlap, the one drawn on top: the last.
  const tile = report.shown
    .map((name) => run.tiles.find((t) => t.name === name))
    .findLast((t) => containsCoordinate(t.extent, coordinate));
  if (!tile) {
    $('inspector').innerHTML = '<p class="hint">No tile here.</p>';
    report.last = null;
    return null;
  }
  const out = {tile: tile.name, x, y};
  const cls = await valueAt(tile.layers.class, x, y);
  if (!cls) {
    report.last = null;
    return null;
  }
  out.col = cls.col;
  out.row = cls.row;
  out.class = cls.values[0];
  out.className = out.class === 0 ? 'no data' : className(tile.classes, out.class);
  if (tile.layers.confidence) {
    const v = await valueAt(tile.layers.confidence, x, y);
    out.confidence = v ? v.values[0] : null;
  }
  if (tile.layers.aoa) {
    const v = await valueAt(tile.layers.aoa, x, y);
    if (v && !Number.isNaN(v.values[0])) {
      out.di = v.values[0];
      out.insideAOA = v.values[1] === 1;
    }
  }
  if (tile.layers.labels) {
    const v = await valueAt(tile.layers.labels, x, y);
    if (v) {
      out.label = v.values[0];
      out.labelName = out.label === 0 ? 'no label' : className(tile.classes, out.label);
    }
  }
  showInspection(out, tile);
  const img = await image(tile.layers.class);
  const [ox, oy] = img.getOrigin();
  const [rx, ry] = img.getResolution();
  for (const m of markers) {
    m.getElement().style.width = m.getElement().style.height = `${Math.max(6, rx / view.getResolution())}px`;
    m.setPosition([ox + (out.col + 0.5) * rx, oy + (out.row + 0.5) * ry]);
  }
  report.last = out;
  return out;
}

function row(name, html) {
  return `<tr><th>${name}</th><td>${html}</td></tr>`;
}

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'})[c]);
}

function swatch(tile, value) {
  const c = tile.classes.find((c) => c.value === value);
  return c ? `<span class="swatch" style="background:${c.color}"></span> ` : '';
}

function showInspection(o, tile) {
  let html = row('tile', esc(o.tile)) + row('pixel', `column ${o.col}, row ${o.row}`) + row('x, y', `${o.x.toFixed(1)}, ${o.y.toFixed(1)}`);
  html += row('class', `${swatch(tile, o.class)}${esc(o.className)} <span class="code">(${o.class})</span>`);
  if ('confidence' in o) {
    html += row('confidence', o.confidence ? `${o.confidence} %` : 'no data');
  }
  if ('di' in o) {
    const where = o.insideAOA ? 'inside the area of applicability' : '<span class="outside">outside the area of applicability</span>';
    html += row('dissimilarity', `${o.di.toFixed(3)}${tile.aoaThreshold ? ` (threshold ${tile.aoaThreshold.toFixed(3)})` : ''}<br>${where}`);
  } else if (tile.layers.aoa) {
    html += row('dissimilarity', 'no data');
  }
  if ('label' in o) {
    html += row('label', `${swatch(tile, o.label)}${esc(o.labelName)} <span class="code">(${o.label})</span>`);
    if (o.label !== 0 && o.class !== 0) {
      html += row('', o.label === o.class ? 'the map agrees with the label' : '<span class="outside">the map disagrees with the label</span>');
    }
  }
  $('inspector').innerHTML = `<table>${html}</table>`;
}

function showLegend(tile) {
  $('legend').innerHTML = tile.classes
    .map((c) => `<li><span class="swatch" style="background:${c.color}"></span><span class="code">${c.value}</span> ${esc(c.name)}</li>`)
    .join('');
  $('aoa-threshold').textContent = tile.aoaThreshold ? `(dissimilarity index above ${tile.aoaThreshold.toFixed(3)})` : '';
}

async function showMetrics(tile) {
  const url = tile.files['metrics.json'];
  $('metrics').hidden = !url;
  if (!url) {
    return;
  }
  const m = await (await fetch(url)).json();
  const parts = [];
  if (typeof m.overall_accuracy === 'number') {
    parts.push(`overall accuracy ${(100 * m.overall_accuracy).toFixed(1)} %`);
  }
  if (typeof m.kappa === 'number') {
    parts.push(`kappa ${m.kappa.toFixed(3)}`);
  }
  if (typeof m.macro_f1 === 'number') {
    parts.push(`macro F1 ${m.macro_f1.toFixed(3)}`);
  }
  if (typeof m.total === 'number') {
    parts.push(`${m.total.toLocaleString('en')} labelled pixels`);
  }
  $('metrics-body').textContent = `${tile.name}, against its labels: ${parts.join(', ')}.`;
}

// tileView reads a tile's grid from its class COG.
async function tileView(tile) {
  const img = await image(tile.layers.class);
  const [ox, oy] = img.getOrigin();
  const [rx, ry] = img.getResolution();
  const x1 = ox + rx * img.getWidth();
  const y1 = oy + ry * img.getHeight();
  tile.extent = [Math.min(ox, x1), Math.min(oy, y1), Math.max(ox, x1), Math.max(oy, y1)];
  tile.resolution = Math.abs(rx);
  if (!tile.epsg) {
    const keys = img.getGeoKeys() || {};
    tile.epsg = keys.ProjectedCSTypeGeoKey || keys.GeographicTypeGeoKey || 0;
  }
  tile.code = tile.epsg ? 'EPSG:' + tile.epsg : 'tile:' + tile.name;
  if (!getProjection(tile.code)) {
    // The rasters' own projected coordinates: no transform to any other
    // projection is needed, since the map shows nothing else.
    addProjection(new Projection({code: tile.code, units: 'm'}));
  }
}

// show puts the tiles named by the selector's value on the map.
async function show(choice) {
  const tiles = choice === '*' ? run.tiles : run.tiles.filter((t) => t.name === choice);
  const code = tiles[0].code;
  const shown = tiles.filter((t) => t.code === code);
  report.shown = shown.map((t) => t.name);
  for (const m of markers) {
    m.setPosition(undefined);
  }
  const extent = createEmpty();
  for (const t of shown) {
    extend(extent, t.extent);
  }
  const res = Math.min(...shown.map((t) => t.resolution));
  view = new View({projection: code, maxResolution: res * 4096, minResolution: res / 16, constrainResolution: false});
  map.setView(view);
  labelsMap.setView(view);
  for (const kind of KINDS) {
    groups[kind].getLayers().clear();
    const layers = shown.filter((t) => t.layers[kind] && (kind !== 'stack' || t.rgb)).map((t) => layer(kind, t));
    groups[kind].getLayers().extend(layers);
  }
  besideGroup.getLayers().clear();
  besideGroup.getLayers().extend(shown.filter((t) => t.layers.labels).map((t) => layer('labels', t)));
  toggles();
  view.fit(extent, {size: map.getSize(), padding: [10, 10, 10, 10]});
  showLegend(shown[0]);
  showMetrics(shown[0]).catch(fail);
  const skipped = tiles.length - shown.length;
  status(
    `${shown.length} tile${shown.length === 1 ? '' : 's'} in ${code}` +
      (skipped ? `; ${skipped} in other projections: pick them in the tile list` : ''),
  );
}

// toggles applies the checkboxes and hides those of layers no tile has.
function toggles() {
  for (const input of document.querySelectorAll('#toggles input[data-layer]')) {
    const kind = input.dataset.layer;
    const has = groups[kind].getLayers().getLength() > 0;
    input.parentElement.classList.toggle('absent', !has);
    groups[kind].setVisible(has && input.checked);
  }
  const hasLabels = besideGroup.getLayers().getLength() > 0;
  $('beside-toggle').classList.toggle('absent', !hasLabels);
  const beside = hasLabels && $('beside').checked;
  if ($('labels-map').hidden === beside) {
    $('labels-map').hidden = !beside;
    map.updateSize();
    labelsMap.updateSize();
  }
}

function rendered(m) {
  return new Promise((resolve) => {
    m.once('rendercomplete', () => resolve());
    m.render();
  });
}

// measure renders the map once more and counts, per visible layer kind,
// the pixels each drew (not transparent).
async function measure() {
  counting = {};
  try {
    await rendered(map);
    const drawn = counting;
    if (!$('labels-map').hidden) {
      counting = {};
      await rendered(labelsMap);
      drawn.besideLabels = counting.labels || 0;
    }
    return drawn;
  } finally {
    counting = null;
  }
}

// pixelOf says where on the page the centre of a tile's class pixel is.
async function pixelOf(tileName, col, row) {
  const img = await image(run.tiles.find((t) => t.name === tileName).layers.class);
  const [ox, oy] = img.getOrigin();
  const [rx, ry] = img.getResolution();
  const coord = [ox + (col + 0.5) * rx, oy + (row + 0.5) * ry];
  const p = map.getPixelFromCoordinate(coord);
  const r = map.getTargetElement().getBoundingClientRect();
  return {x: r.left + p[0], y: r.top + p[1], coordinate: coord};
}

async function main() {
  const resp = await fetch('run.json');
  if (!resp.ok) {
    throw new Error(`run.json: ${resp.status} ${resp.statusText}`);
  }
  run = await resp.json();
  $('run-name').textContent = run.name;
  document.title = `lulc view: ${run.name}`;
  await Promise.all(run.tiles.map(tileView));
  report.tiles = run.tiles.map((t) => ({name: t.name, epsg: t.epsg, extent: t.extent, layers: Object.keys(t.layers)}));

  for (const kind of KINDS) {
    groups[kind] = new LayerGroup();
  }
  map = new OLMap({
    target: 'map',
    layers: KINDS.map((k) => groups[k]),
    controls: defaultControls({attribution: false}).extend([new ScaleLine()]),
  });
  labelsMap = new OLMap({target: 'labels-map', layers: [besideGroup], controls: defaultControls({attribution: false, zoom: false})});
  for (const m of [map, labelsMap]) {
    m.on('singleclick', (e) => inspect(e.coordinate).catch(fail));
    const el = document.createElement('div');
    el.className = 'marker';
    const marker = new Overlay({element: el, positioning: 'center-center', stopEvent: false});
    m.addOverlay(marker);
    markers.push(marker);
  }

  const select = $('tile');
  const options = run.tiles.map((t) => `<option value="${esc(t.name)}">${esc(t.name)}</option>`);
  if (run.tiles.length > 1) {
    options.unshift('<option value="*">all tiles</option>');
  }
  select.innerHTML = options.join('');
  select.disabled = run.tiles.length === 1;
  if (params.get('tile')) {
    select.value = params.get('tile');
  }
  if (params.has('layers')) {
    // ?layers=class,aoa: the layers shown at first, in place of the
    // checkboxes' defaults.
    const kinds = params.get('layers').split(',');
    for (const input of document.querySelectorAll('#toggles input[data-layer]')) {
      input.checked = kinds.includes(input.dataset.layer);
    }
  }
  $('beside').checked = params.get('beside') === '1';
  select.addEventListener('change', () => show(select.value).catch(fail));
  for (const input of document.querySelectorAll('#toggles input')) {
    input.addEventListener('change', toggles);
  }
  await show(select.value);

  await rendered(map);
  report.inspect = (coordinate) => inspect(coordinate);
  report.measure = measure;
  report.pixelOf = pixelOf;
  report.ready = true;
}

main().catch(fail);
