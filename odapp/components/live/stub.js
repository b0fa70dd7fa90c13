// The live curves' element: the code and the tables arrive in the tables' element (live.js, odlab_live_data),
// which the page mounts first; until both are there, wait for it to say so.
export default function (component) {
  const el = component.parentElement;
  el.__odliveWaiting = component;
  const run = () => {
    const c = el.__odliveWaiting;
    if (c && window.__odliveCode && window.__odliveCode(c)) el.__odliveWaiting = null;
  };
  run();
  if (el.__odliveWaiting && !el.__odliveListen) {
    el.__odliveListen = run;
    window.addEventListener("odlive-data", run);
  }
}
