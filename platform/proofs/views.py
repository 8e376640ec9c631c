from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from proofs.models import ProofAttempt


@login_required
def detail(request, pk):
    attempt = get_object_or_404(ProofAttempt.objects.visible_to(request.user).select_related("run", "parent"), pk=pk)
    return render(request, "proofs/detail.html", {"attempt": attempt, "retries": attempt.retries.all()})
