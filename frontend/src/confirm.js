// Every destructive action asks first: a form marked data-confirm="what will happen" submits only
// once the person agrees (templates put the consequences in the question, e.g. the GPUs released).
document.addEventListener("submit", (event) => {
  const form = event.target instanceof HTMLFormElement ? event.target.closest("form[data-confirm]") : null;
  if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
}, true);
