// Where keyboard focus goes when an in-place action re-renders the part
// of the page its control was in: the same action of the row that took
// the control's row's place (or the nearest row after it, then before
// it, that offers the action), else the heading of that part of the page.
// A control stays focusable while its request runs (aria-disabled, never
// disabled), so the browser does not drop the focus to <body> first.

// placeOf remembers where control sits: its part of the page (an element
// with an id), the row or article it is in, by position, and its verb.
export function placeOf(control) {
  const item = control?.closest?.('tr, article');
  const region = item?.closest('[data-region], [data-focus-region]');
  if (!region?.id) return null;
  const items = [...region.querySelectorAll(item.tagName)];
  return { region: region.id, tag: item.tagName, index: items.indexOf(item), verb: control.textContent.trim() };
}

// successor is control, or, when a re-render replaced it while its
// request ran, the control with the same label in the row or article
// whose data attributes match its own: the same action of the same item.
export function successor(control) {
  if (control.isConnected) return control;
  const item = control.closest('tr, article');
  if (!item) return control;
  const label = control.getAttribute('aria-label') ?? control.textContent;
  const same = (x) => Object.keys(item.dataset).length > 0 &&
    Object.entries(item.dataset).every(([k, v]) => x.dataset[k] === v);
  for (const next of document.querySelectorAll(item.tagName)) {
    if (!same(next)) continue;
    const b = [...next.querySelectorAll('button')].find((x) => (x.getAttribute('aria-label') ?? x.textContent) === label);
    if (b) return b;
  }
  return control;
}

// land focuses what takes the place of the control place names.
export function land(place) {
  const region = document.getElementById(place.region);
  if (!region) return;
  const items = [...region.querySelectorAll(place.tag)];
  const order = [...items.slice(place.index), ...items.slice(0, place.index).reverse()];
  for (const item of order) {
    const next = [...item.querySelectorAll('button')].find((b) => b.textContent.trim() === place.verb && b.closest(place.tag) === item);
    if (next) {
      next.focus();
      return;
    }
  }
  toHeading(region);
}

// toHeading focuses the heading of the part of the page region is in.
export function toHeading(region) {
  const heading = region.closest('section')?.querySelector('h2') ?? document.querySelector('main h1');
  heading.tabIndex = -1;
  heading.focus();
}

// busy marks control as working on its request without taking its focus.
export function busy(control, on) {
  if (on) control.setAttribute('aria-disabled', 'true');
  else control.removeAttribute('aria-disabled');
}

export const isBusy = (control) => control.getAttribute('aria-disabled') === 'true';
