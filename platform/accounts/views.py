from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.models import ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'eval notebook'.")


@login_required
def tokens(request):
    form = TokenForm(request.POST or None)
    new_token = None
    if request.method == "POST" and form.is_valid():
        _, new_token = ApiToken.issue(request.user, form.cleaned_data["name"])
        form = TokenForm()
    return render(request, "accounts/tokens.html", {
        "form": form, "new_token": new_token, "tokens": request.user.api_tokens.all(),
    })


@login_required
@require_POST
def revoke(request, pk):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.delete()
    messages.success(request, f"Token “{token.name}” revoked.")
    return redirect("accounts:tokens")
