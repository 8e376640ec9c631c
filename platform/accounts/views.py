from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.models import DEFAULT_LIFETIME_DAYS, ApiToken, TokenScope


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'eval notebook'.")
    scope = forms.ChoiceField(choices=TokenScope.choices, initial=TokenScope.READ, required=False,
                              help_text="Read only, unless the script launches, cancels or uploads.")
    lifetime_days = forms.IntegerField(min_value=1, max_value=365, initial=DEFAULT_LIFETIME_DAYS, required=False,
                                       label="Expires after (days)", help_text="From 1 to 365 days.")

    def clean_scope(self):
        return self.cleaned_data["scope"] or TokenScope.READ  # the narrowest, unless asked for more

    def clean_lifetime_days(self):
        return self.cleaned_data["lifetime_days"] or DEFAULT_LIFETIME_DAYS


@login_required
def tokens(request):
    form = TokenForm(request.POST or None)
    new_token = None
    if request.method == "POST" and form.is_valid():
        _, new_token = ApiToken.issue(request.user, form.cleaned_data["name"], scope=form.cleaned_data["scope"],
                                     lifetime_days=form.cleaned_data["lifetime_days"])
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
