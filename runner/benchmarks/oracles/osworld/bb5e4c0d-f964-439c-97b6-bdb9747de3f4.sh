. "$TASK_DIR/oracle_lib.sh"
chrome_edit Default/Preferences 'd["default_search_provider_data"] = {"template_url_data": {
    "short_name": "Bing", "keyword": "bing.com", "url": "https://www.bing.com/search?q={searchTerms}",
    "favicon_url": "https://www.bing.com/favicon.ico", "safe_for_autoreplace": False, "prepopulate_id": 3}}'
