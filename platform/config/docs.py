"""The docs site (docs/, built by `make docs` into settings.DOCS_SITE_DIR), served under /docs/.

Served by Django, as the built files are, so the pages' help links work wherever the platform runs,
without a second web server to configure; the site holds nothing private, so no login is asked.
"""

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.static import serve


def page(request: HttpRequest, path: str = "") -> HttpResponse:
    root = settings.DOCS_SITE_DIR
    if not (root / "index.html").is_file():
        raise Http404(f"The docs site is not built on this server: run `make docs` (it writes {root}).")
    # MkDocs links pages as page.html (mkdocs.yml: use_directory_urls false); a folder means its index.
    if path == "" or path.endswith("/"):
        path += "index.html"
    return serve(request, path, document_root=root)
